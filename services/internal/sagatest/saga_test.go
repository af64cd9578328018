package sagatest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
)

// TestSagaScenariosOnASharedDeployment runs the scenarios that need no
// fault of their own on one deployment, in parallel: each uses its own
// SKUs and orders and checks only those, so they cannot see each other.
// The deployment duplicates every webhook and reorders half of them, which
// the other scenarios must absorb as well. Starting three services per
// scenario cost more than the scenarios themselves.
func TestSagaScenariosOnASharedDeployment(t *testing.T) {
	t.Parallel()
	f := providersim.DefaultFaults()
	f.WebhookDuplicateRate, f.WebhookReorderRate, f.WebhookDelay = 1, 0.5, 300*time.Millisecond
	f.ProcessingDelay = 500 * time.Millisecond // pm_card_processing
	s := newSaga(t, opts{faults: f})
	// Runs once every scenario is done, before the deployment stops.
	t.Cleanup(func() {
		if !t.Failed() {
			s.audit()
		}
	})
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *saga)
	}{
		{"HappyPathConfirmsOrderCommitsStockAndCharges", happyPathConfirmsOrderCommitsStockAndCharges},
		{"OutOfStockCancelsWithoutCharge", outOfStockCancelsWithoutCharge},
		{"DeclinedCardCancelsAndReleasesStock", declinedCardCancelsAndReleasesStock},
		{"SuccessKnownOnlyFromTheWebhookConfirms", successKnownOnlyFromTheWebhookConfirms},
		{"DuplicatedAndReorderedWebhooksApplyOnce", duplicatedAndReorderedWebhooksApplyOnce},
		{"ConcurrentOrdersForTheLastUnitExactlyOneWins", concurrentOrdersForTheLastUnitExactlyOneWins},
		{"MetricsCountTheSagaAndLintClean", metricsCountTheSagaAndLintClean},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.run(t, s.on(t))
		})
	}
}

func happyPathConfirmsOrderCommitsStockAndCharges(t *testing.T, s *saga) {
	s.stock(map[string]int{"SKU-HAPPY": 5})
	id := s.order("SKU-HAPPY", 2, "pm_card_visa")
	if o := s.terminal(id, 30*time.Second); o.Status != "CONFIRMED" {
		t.Fatalf("order %s = %s (%s); want CONFIRMED", id, o.Status, o.Reason)
	}
	if p := s.paymentStatus(id); p != "paid" {
		t.Errorf("payment = %q; want paid", p)
	}
	s.waitReservation(id, "COMMITTED")
	if a, r, c := s.stockOf("SKU-HAPPY"); a != 3 || r != 0 || c != 2 {
		t.Errorf("stock = %d available, %d reserved, %d committed; want 3/0/2", a, r, c)
	}
	o := s.getOrder(id)
	var hist []string
	for _, h := range o.History {
		hist = append(hist, h.Status)
	}
	// inventory.reserved and payment.processed travel on different topics,
	// and Kafka orders records only within a partition: order-svc may see the
	// payment first, and then it confirms straight from PENDING and ignores
	// the late reservation.
	if h := fmt.Sprint(hist); h != "[PENDING RESERVED CONFIRMED]" && h != "[PENDING CONFIRMED]" {
		t.Errorf("history = %v; want [PENDING RESERVED CONFIRMED] or [PENDING CONFIRMED]", hist)
	}
}

func outOfStockCancelsWithoutCharge(t *testing.T, s *saga) {
	s.stock(map[string]int{"SKU-SHORT": 1})
	id := s.order("SKU-SHORT", 2, "pm_card_visa")
	if o := s.terminal(id, 30*time.Second); o.Status != "CANCELLED" || o.Reason != "out_of_stock" {
		t.Fatalf("order = %s (%s); want CANCELLED (out_of_stock)", o.Status, o.Reason)
	}
	if p := s.paymentStatus(id); p != "" {
		t.Errorf("payment row %q exists for an order that never had stock", p)
	}
	if a, r, c := s.stockOf("SKU-SHORT"); a != 1 || r != 0 || c != 0 {
		t.Errorf("stock = %d/%d/%d; want 1/0/0", a, r, c)
	}
}

func declinedCardCancelsAndReleasesStock(t *testing.T, s *saga) {
	s.stock(map[string]int{"SKU-DECLINE": 3})
	id := s.order("SKU-DECLINE", 2, providersim.PaymentMethodDeclined)
	if o := s.terminal(id, 30*time.Second); o.Status != "CANCELLED" || o.Reason != "payment_declined" {
		t.Fatalf("order = %s (%s); want CANCELLED (payment_declined)", o.Status, o.Reason)
	}
	if p := s.paymentStatus(id); p != "failed" {
		t.Errorf("payment = %q; want failed", p)
	}
	if r := s.reservation(id); r != "RELEASED" {
		t.Errorf("reservation = %q; want RELEASED", r)
	}
	if a, r, c := s.stockOf("SKU-DECLINE"); a != 3 || r != 0 || c != 0 {
		t.Errorf("stock = %d/%d/%d; want 3/0/0", a, r, c)
	}
}

func TestProvider5xxThenRecoveryChargesOnceAndConfirms(t *testing.T) {
	t.Parallel()
	f := providersim.DefaultFaults()
	f.ServerErrorRate = 1
	s := newSaga(t, opts{faults: f})
	s.stock(map[string]int{"SKU-A": 5})
	id := s.order("SKU-A", 1, "pm_card_visa")
	eventually(t, 30*time.Second, "two refused attempts", func() error {
		if n := s.scalar(s.payment, `select attempts from payments where order_id = $1`, id); n < "2" {
			return fmt.Errorf("attempts %q", n)
		}
		return nil
	})
	if st := s.getOrder(id).Status; st == "CONFIRMED" || st == "CANCELLED" {
		t.Fatalf("order already %s while the provider refuses every call", st)
	}
	f.ServerErrorRate = 0
	if err := s.sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	if o := s.terminal(id, 30*time.Second); o.Status != "CONFIRMED" {
		t.Fatalf("order = %s (%s); want CONFIRMED after the provider recovered", o.Status, o.Reason)
	}
	if n := s.scalar(s.payment, `select count(distinct provider_payment_id) from payments`); n != "1" {
		t.Errorf("%s provider payments; want 1", n)
	}
	s.audit()
}

func successKnownOnlyFromTheWebhookConfirms(t *testing.T, s *saga) {
	// pm_card_processing answers "processing"; payment-svc does not poll
	// (recheck 0), so only the succeeded webhook can settle it.
	s.stock(map[string]int{"SKU-WEBHOOK": 5})
	id := s.order("SKU-WEBHOOK", 1, providersim.PaymentMethodProcessing)
	if o := s.terminal(id, 30*time.Second); o.Status != "CONFIRMED" {
		t.Fatalf("order = %s (%s); want CONFIRMED", o.Status, o.Reason)
	}
	src := s.scalar(s.payment, `select t.source from payment_transitions t join payments p on p.id = t.payment_id
		where p.order_id = $1 and t.to_status = 'paid'`, id)
	if len(src) < 8 || src[:8] != "webhook:" {
		t.Errorf("paid by %q; want the webhook", src)
	}
}

func duplicatedAndReorderedWebhooksApplyOnce(t *testing.T, s *saga) {
	s.stock(map[string]int{"SKU-DUP": 10})
	var ids []string
	for range 4 {
		ids = append(ids, s.order("SKU-DUP", 1, providersim.PaymentMethodProcessing))
	}
	for _, id := range ids {
		if o := s.terminal(id, 30*time.Second); o.Status != "CONFIRMED" {
			t.Fatalf("order %s = %s (%s); want CONFIRMED", id, o.Status, o.Reason)
		}
	}
	eventually(t, 10*time.Second, "duplicates delivered", func() error {
		if n := s.scalar(s.payment, `select coalesce(sum(e.deliveries - 1), 0) from provider_events e
			join payments p on p.provider_payment_id = e.provider_payment_id where p.order_id = any($1)`, ids); n == "0" {
			return fmt.Errorf("no duplicate delivery seen yet")
		}
		return nil
	})
	if n := s.scalar(s.payment, `select count(*) from payment_transitions t join payments p on p.id = t.payment_id
		where p.order_id = any($1)`, ids); n != "4" {
		t.Errorf("%s transitions for 4 payments; want 4 (one each)", n)
	}
	if n := s.scalar(s.payment, `select count(*) from outbox where event_type = 'payment.processed' and aggregate_id = any($1)`, ids); n != "4" {
		t.Errorf("%s payment.processed events; want 4", n)
	}
}

func TestSuccessAfterTheOrderTimedOutIsRefunded(t *testing.T) {
	t.Parallel()
	f := providersim.DefaultFaults()
	// The order must time out after payment-svc wrote its intent and before
	// the provider settles it. A warm-up order first makes sure every
	// consumer group has joined (a join can take seconds on a loaded
	// machine); then 6s leaves room for order → reservation → intent, and
	// the payment settles 12s after its creation.
	f.ProcessingDelay = 12 * time.Second
	s := newSaga(t, opts{faults: f, stuckAfter: 6 * time.Second})
	s.stock(map[string]int{"SKU-A": 5, "SKU-WARM": 1})
	s.terminal(s.order("SKU-WARM", 1, "pm_card_visa"), 30*time.Second)
	id := s.order("SKU-A", 2, providersim.PaymentMethodProcessing)
	if o := s.terminal(id, 30*time.Second); o.Status != "CANCELLED" || o.Reason != "timeout" {
		t.Fatalf("order = %s (%s); want CANCELLED (timeout)", o.Status, o.Reason)
	}
	s.waitPayment(id, "refunded")
	s.waitReservation(id, "RELEASED")
	if a, r, c := s.stockOf("SKU-A"); a != 5 || r != 0 || c != 0 {
		t.Errorf("stock = %d/%d/%d; want 5/0/0", a, r, c)
	}
	if st := s.getOrder(id).Status; st != "CANCELLED" {
		t.Errorf("order moved to %s after the late payment", st)
	}
	if n := s.scalar(s.payment, `select count(*) from outbox where event_type = 'payment.refunded'`); n != "1" {
		t.Errorf("%s payment.refunded events; want 1", n)
	}
	s.audit()
}

func TestKill9OfPaymentServiceMidSagaConverges(t *testing.T) {
	t.Parallel()
	f := providersim.DefaultFaults()
	f.Latency = 50 * time.Millisecond // keep calls in flight when the kill lands
	s := newSaga(t, opts{faults: f, recheck: time.Second})
	s.stock(map[string]int{"SKU-A": 100})
	var ids []string
	for range 20 {
		ids = append(ids, s.order("SKU-A", 1, "pm_card_visa"))
	}
	eventually(t, 30*time.Second, "first payment intents", func() error {
		if n := s.scalar(s.payment, `select count(*) from payments`); n == "0" {
			return fmt.Errorf("no payment yet")
		}
		return nil
	})
	s.kill9("payment-svc")
	s.start("payment-svc")
	s.waitReady("payment-svc")
	for _, id := range ids {
		if o := s.terminal(id, 60*time.Second); o.Status != "CONFIRMED" {
			t.Fatalf("order %s = %s (%s); want CONFIRMED", id, o.Status, o.Reason)
		}
	}
	// inventory commits stock on payment.processed, which it consumes
	// independently of order-svc: a confirmed order does not mean committed
	// stock yet, only that it will be.
	eventually(t, 30*time.Second, "stock committed for 20 orders", func() error {
		if a, r, c := s.stockOf("SKU-A"); a != 80 || r != 0 || c != 20 {
			return fmt.Errorf("stock = %d/%d/%d; want 80/0/20", a, r, c)
		}
		return nil
	})
	// One succeeded provider payment and one payment.processed per order,
	// though payment-svc died with calls in flight.
	s.audit()
}

func concurrentOrdersForTheLastUnitExactlyOneWins(t *testing.T, s *saga) {
	s.stock(map[string]int{"SKU-LAST": 1})
	const n = 12
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(map[string]any{"customer_id": fmt.Sprintf("cus_%d", i), "currency": "EUR",
				"items": []map[string]any{{"sku": "SKU-LAST", "quantity": 1, "unit_price": 500}}})
			req, _ := http.NewRequest(http.MethodPost, s.orderURL+"/orders", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+s.apiKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var o struct{ ID string }
			_ = json.NewDecoder(resp.Body).Decode(&o)
			ids[i] = o.ID
		}()
	}
	wg.Wait()
	confirmed := 0
	for _, id := range ids {
		o := s.terminal(id, 30*time.Second)
		switch {
		case o.Status == "CONFIRMED":
			confirmed++
		case o.Reason != "out_of_stock":
			t.Errorf("order %s cancelled for %q; want out_of_stock", id, o.Reason)
		}
	}
	if confirmed != 1 {
		t.Fatalf("%d orders got the last unit; want exactly 1", confirmed)
	}
	eventually(t, 30*time.Second, "the last unit committed", func() error { // see the kill -9 test
		if a, r, c := s.stockOf("SKU-LAST"); a != 0 || r != 0 || c != 1 {
			return fmt.Errorf("stock = %d/%d/%d; want 0/0/1", a, r, c)
		}
		return nil
	})
}
