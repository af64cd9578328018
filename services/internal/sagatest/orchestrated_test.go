package sagatest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/providersim"
	"github.com/concordhq/concord/services/shipping/carriersim"
)

// shiftedClock is the system clock moved forward by what a test adds, so
// provider-sim can be made to live through a hold's expiry at once.
type shiftedClock struct{ by atomic.Int64 }

func (c *shiftedClock) Now() time.Time { return time.Now().Add(time.Duration(c.by.Load())) }

func (c *shiftedClock) add(d time.Duration) { c.by.Add(int64(d)) }

// declinedPostalCode is an address the carrier refuses to deliver to.
const declinedPostalCode = "99999"

// TestOrchestratedCheckoutWithEveryParticipantReal runs the orchestrated
// checkout through every real participant — order-svc, the orchestrator,
// payment-svc placing and capturing holds at provider-sim through
// stripe-go, inventory-svc, shipping-svc booking at carrier-sim — beside a
// choreographed order on the same deployment: a saga that completes, one
// whose shipment the carrier declines (compensated in reverse), and one
// whose hold expires at the provider before the capture (compensated after
// every other step ran). The audit of both flows holds at the end.
func TestOrchestratedCheckoutWithEveryParticipantReal(t *testing.T) {
	t.Parallel()
	clock := &shiftedClock{}
	cf := carriersim.DefaultFaults()
	cf.DeclinePostalCodes = []string{declinedPostalCode}
	s := newSaga(t, opts{orchestrated: true, carrierFaults: cf, clock: clock, holdExpiry: time.Hour})
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: apiKey, BaseURL: s.simURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			s.audit()
		}
	})
	s.stock(map[string]int{"SKU-ORCH": 10, "SKU-CHOR": 2})

	chor := s.order("SKU-CHOR", 1, "pm_card_visa")

	t.Run("Completed", func(t *testing.T) {
		s := s.on(t)
		id := s.orchestratedOrder("SKU-ORCH", 2, "10115")
		if o := s.terminal(id, 45*time.Second); o.Status != "CONFIRMED" {
			t.Fatalf("order %s = %s (%s); want CONFIRMED", id, o.Status, o.Reason)
		}
		s.expectSaga(id, "COMPLETED", "reserve_credit=executed", "reserve_inventory=executed", "create_shipment=executed", "capture_payment=executed")
		s.expectHold(id, "captured")
		if p := s.providerPayment(gw, id); p.Status != paymentprovider.StatusSucceeded || p.Amount != 2000 || !p.ManualCapture {
			t.Errorf("provider payment %+v; want a captured manual-capture intent of 2000", p)
		}
		s.waitReservation(id, "COMMITTED")
		if sh := s.carrierShipments(id); len(sh) != 1 || sh[0].Status != carriersim.StatusCreated {
			t.Errorf("carrier shipments %+v; want one booked", sh)
		}
	})

	t.Run("CarrierDeclineCompensatesInReverse", func(t *testing.T) {
		s := s.on(t)
		id := s.orchestratedOrder("SKU-ORCH", 1, declinedPostalCode)
		if o := s.terminal(id, 45*time.Second); o.Status != "CANCELLED" {
			t.Fatalf("order %s = %s (%s); want CANCELLED", id, o.Status, o.Reason)
		}
		s.expectSaga(id, "COMPENSATED", "reserve_credit=compensated", "reserve_inventory=compensated", "create_shipment=failed")
		s.expectHold(id, "released")
		if p := s.providerPayment(gw, id); p.Status != paymentprovider.StatusCanceled {
			t.Errorf("provider payment %+v; want the hold canceled", p)
		}
		s.waitReservation(id, "RELEASED")
	})

	t.Run("HoldExpiredBeforeCaptureCompensatesEveryStep", func(t *testing.T) {
		s := s.on(t)
		// The carrier books the next shipment but withholds its answer:
		// shipping-svc finds it by its key after its 5s timeout, and the
		// hold expires at the provider meanwhile.
		if _, err := s.carrier.SetFaults(map[string]string{"hang-next": "1"}); err != nil {
			t.Fatal(err)
		}
		id := s.orchestratedOrder("SKU-ORCH", 3, "10115")
		s.waitHold(id, "authorized")
		clock.add(2 * time.Hour)
		eventually(t, 20*time.Second, "the provider to expire the hold", func() error {
			if p := s.providerPayment(gw, id); p.Status != paymentprovider.StatusCanceled || p.CancellationReason != "automatic" {
				return fmt.Errorf("provider payment %s, cancellation %q", p.Status, p.CancellationReason)
			}
			return nil
		})
		if o := s.terminal(id, 60*time.Second); o.Status != "CANCELLED" {
			t.Fatalf("order %s = %s (%s); want CANCELLED", id, o.Status, o.Reason)
		}
		s.expectSaga(id, "COMPENSATED", "reserve_credit=compensated", "reserve_inventory=compensated", "create_shipment=compensated",
			"capture_payment=failed")
		s.expectHold(id, "expired")
		s.waitReservation(id, "RELEASED")
		if sh := s.carrierShipments(id); len(sh) != 1 || sh[0].Status != carriersim.StatusCancelled {
			t.Errorf("carrier shipments %+v; want the one booked, cancelled", sh)
		}
	})

	if o := s.terminal(chor, 30*time.Second); o.Status != "CONFIRMED" {
		t.Errorf("choreographed order %s = %s (%s); want CONFIRMED", chor, o.Status, o.Reason)
	}
	// 2 bought by the completed saga; the others' units back.
	eventually(t, 20*time.Second, "stock settled", func() error {
		if a, r, c := s.stockOf("SKU-ORCH"); a != 8 || r != 0 || c != 2 {
			return fmt.Errorf("SKU-ORCH %d available, %d reserved, %d committed; want 8/0/2", a, r, c)
		}
		return nil
	})
}

// orchestratedOrder places an order of sku × qty at 1000 each, shipped to
// postal, with "flow": "orchestrated", and returns its id.
func (s *saga) orchestratedOrder(sku string, qty int, postal string) string {
	s.t.Helper()
	var o struct{ ID, Flow string }
	s.post(s.orderURL+"/orders", map[string]any{"customer_id": "cus_1", "currency": "EUR", "payment_method": "pm_card_visa", "flow": "orchestrated",
		"items":            []map[string]any{{"sku": sku, "quantity": qty, "unit_price": 1000}},
		"shipping_address": map[string]any{"line1": "Hauptstr. 1", "city": "Berlin", "postal_code": postal, "country": "DE"}},
		http.StatusCreated, &o)
	if o.Flow != "orchestrated" {
		s.t.Fatalf("order %s flow %q", o.ID, o.Flow)
	}
	return o.ID
}

// expectSaga waits for the order's saga to reach status and checks its
// steps, as "name=status" in step order.
func (s *saga) expectSaga(orderID, status string, steps ...string) {
	s.t.Helper()
	s.waitStatus("saga", status, func() string {
		return s.scalar(s.orchestrator, `select status from saga_executions where order_id = $1`, orderID)
	})
	got := testkit.Strings(s.t, s.orchestrator, `select step_name || '=' || step_status from saga_steps
		where execution_id = (select saga_id from saga_executions where order_id = $1) order by step_order`, orderID)
	if strings.Join(got, " ") != strings.Join(steps, " ") {
		s.t.Errorf("saga of %s: steps %v; want %v", orderID, got, steps)
	}
}

func (s *saga) holdStatus(orderID string) string {
	return s.scalar(s.payment, `select status from payment_holds where order_id = $1`, orderID)
}

func (s *saga) waitHold(orderID, status string) {
	s.t.Helper()
	s.waitStatus("hold", status, func() string { return s.holdStatus(orderID) })
}

// expectHold checks the hold's status once its saga ended: nothing moves it
// any more.
func (s *saga) expectHold(orderID, status string) {
	s.t.Helper()
	if got := s.holdStatus(orderID); got != status {
		s.t.Errorf("hold of %s is %q; want %q", orderID, got, status)
	}
}

// providerPayment is the PaymentIntent the order's hold placed.
func (s *saga) providerPayment(gw *paymentprovider.Client, orderID string) paymentprovider.Payment {
	s.t.Helper()
	id := s.scalar(s.payment, `select provider_payment_id from payment_holds where order_id = $1`, orderID)
	if id == "" {
		s.t.Fatalf("order %s: no provider payment on its hold", orderID)
	}
	p, err := gw.Get(context.Background(), id)
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

// carrierShipments are the shipments the carrier holds for the order.
func (s *saga) carrierShipments(orderID string) []carriersim.Shipment {
	var out []carriersim.Shipment
	for _, sh := range s.carrier.Shipments() {
		if sh.OrderID == orderID {
			out = append(out, sh)
		}
	}
	return out
}

var _ providersim.Clock = (*shiftedClock)(nil)
