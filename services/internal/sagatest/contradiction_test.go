package sagatest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/providersim"
)

// TestStateCheckedConsumersOnASharedDeployment: schema-valid events that
// contradict what a service knows, produced straight to the deployment's
// topics as a forger with write access would, move no money and no stock;
// each is recorded with its reason and counted, and the services go on.
// A genuine reservation that overtakes its order is charged once the
// order arrives. payment-svc waits 5s for an unknown order.
//
// The deployment is not audited: the scenarios leave payments and
// refusals for orders order-svc never placed, on purpose.
func TestStateCheckedConsumersOnASharedDeployment(t *testing.T) {
	t.Parallel()
	s := newSaga(t, opts{faults: providersim.DefaultFaults(), unknownOrderWait: 5 * time.Second})
	for _, sc := range []struct {
		name string
		run  func(*testing.T, *saga)
	}{
		{"AForgedReservationForAnUnknownOrderChargesNothing", aForgedReservationForAnUnknownOrderChargesNothing},
		{"AForgedCancellationOfAConfirmedOrderRefundsAndReleasesNothing", aForgedCancellationOfAConfirmedOrderRefundsAndReleasesNothing},
		{"AReservationBeforeItsOrderIsChargedWhenTheOrderArrives", aReservationBeforeItsOrderIsChargedWhenTheOrderArrives},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.run(t, s.on(t))
		})
	}
}

func aForgedReservationForAnUnknownOrderChargesNothing(t *testing.T, s *saga) {
	order := schemas.NewEventID() // an order id nobody placed
	labels := map[string]string{"service": "payment-svc", "type": "inventory.reserved", "reason": "unknown_order"}
	before := s.counter(s.ops["payment-svc"], labels)
	amount := int64(4200)
	s.produce(contract.InventoryReservedV2{OrderID: order, ReservationID: schemas.NewEventID(),
		Items:  []contract.InventoryReservedV2Item{{SKU: "SKU-FORGED", Quantity: 1}},
		Amount: &amount, Currency: "EUR", CustomerID: "cus_1", PaymentMethod: "pm_card_visa"})
	s.waitRefused(s.payment, order, "inventory.reserved unknown_order")
	if p := s.paymentStatus(order); p != "" {
		t.Errorf("payment row %q for an order nobody placed", p)
	}
	if got := s.providerPayments(order); len(got) != 0 {
		t.Errorf("provider payments for an order nobody placed: %+v", got)
	}
	if got := s.counter(s.ops["payment-svc"], labels); got != before+1 {
		t.Errorf("payment-svc concord_contradicting_events_total%v = %v; want %v", labels, got, before+1)
	}
}

func aForgedCancellationOfAConfirmedOrderRefundsAndReleasesNothing(t *testing.T, s *saga) {
	s.stock(map[string]int{"SKU-KEPT": 3})
	id := s.order("SKU-KEPT", 2, "pm_card_visa")
	if o := s.terminal(id, 30*time.Second); o.Status != "CONFIRMED" {
		t.Fatalf("order %s = %s (%s); want CONFIRMED", id, o.Status, o.Reason)
	}
	s.waitPayment(id, "paid")
	s.waitReservation(id, "COMMITTED")
	// The forger writes after order.confirmed reached both services (a
	// cancellation ahead of it on the partition is one of a RESERVED
	// order, which the saga compensates as ever).
	eventually(t, 30*time.Second, "both services saw order.confirmed", func() error {
		p := s.scalar(s.payment, `select confirmed_at is not null from known_orders where order_id = $1`, id)
		i := s.scalar(s.inventory, `select order_confirmed from reservations where order_id = $1`, id)
		if p != "true" || i != "true" {
			return fmt.Errorf("payment-svc %q, inventory-svc %q", p, i)
		}
		return nil
	})
	payLabels := map[string]string{"service": "payment-svc", "type": "order.cancelled", "reason": "order_confirmed"}
	invLabels := map[string]string{"service": "inventory-svc", "type": "order.cancelled", "reason": "order_confirmed"}
	payBefore, invBefore := s.counter(s.ops["payment-svc"], payLabels), s.counter(s.invURL, invLabels)

	s.produce(contract.OrderCancelledV1{OrderID: id, Reason: "timeout"})
	s.waitRefused(s.payment, id, "order.cancelled order_confirmed")
	s.waitRefused(s.inventory, id, "order.cancelled order_confirmed")
	// Give a refund that should not happen time to happen.
	time.Sleep(time.Second)

	if got := s.scalar(s.payment, `select status || ' ' || order_cancelled || ' ' || coalesce(refund_id, '-') from payments where order_id = $1`, id); got != "paid false -" {
		t.Errorf("payment (status, order_cancelled, refund) = %q; want paid, not cancelled, no refund", got)
	}
	for _, p := range s.providerPayments(id) {
		if p.AmountRefunded != 0 {
			t.Errorf("provider refunded %d of %s", p.AmountRefunded, p.ProviderID)
		}
	}
	if r := s.reservation(id); r != "COMMITTED" {
		t.Errorf("reservation = %q; want COMMITTED", r)
	}
	if a, r, c := s.stockOf("SKU-KEPT"); a != 1 || r != 0 || c != 2 {
		t.Errorf("stock = %d/%d/%d; want 1/0/2", a, r, c)
	}
	if n := s.scalar(s.inventory, `select count(*) from outbox where partition_key = $1 and event_type = 'inventory.released'`, id); n != "0" {
		t.Errorf("%s inventory.released for the confirmed order", n)
	}
	if o := s.getOrder(id); o.Status != "CONFIRMED" {
		t.Errorf("order = %s; want CONFIRMED", o.Status)
	}
	if got := s.counter(s.ops["payment-svc"], payLabels); got != payBefore+1 {
		t.Errorf("payment-svc concord_contradicting_events_total%v = %v; want %v", payLabels, got, payBefore+1)
	}
	if got := s.counter(s.invURL, invLabels); got != invBefore+1 {
		t.Errorf("inventory-svc concord_contradicting_events_total%v = %v; want %v", invLabels, got, invBefore+1)
	}
}

// The reservation is produced first and its order.created only once
// payment-svc holds the reservation aside. inventory-svc has no stock of
// the order's SKU, so its own answer to the order is inventory.rejected:
// the only reservation payment-svc ever sees is the early one.
func aReservationBeforeItsOrderIsChargedWhenTheOrderArrives(t *testing.T, s *saga) {
	order := schemas.NewEventID()
	amount := int64(1000)
	s.produce(contract.InventoryReservedV2{OrderID: order, ReservationID: schemas.NewEventID(),
		Items:  []contract.InventoryReservedV2Item{{SKU: "SKU-EARLY", Quantity: 1}},
		Amount: &amount, Currency: "EUR", CustomerID: "cus_1", PaymentMethod: "pm_card_visa"})
	eventually(t, 30*time.Second, "the reservation waiting for its order", func() error {
		if n := s.scalar(s.payment, `select count(*) from waiting_reservations where order_id = $1`, order); n != "1" {
			return fmt.Errorf("%s waiting", n)
		}
		return nil
	})
	if p := s.paymentStatus(order); p != "" {
		t.Fatalf("payment %q before the order was known", p)
	}
	s.produce(contract.OrderCreatedV3{OrderID: order, CustomerID: "cus_1", TotalAmount: amount, Currency: "EUR", PaymentMethod: "pm_card_visa",
		Items: []contract.OrderCreatedV3Item{{SKU: "SKU-EARLY", Quantity: 1, UnitPrice: amount}}})
	s.waitPayment(order, "paid")
	got := s.providerPayments(order)
	if len(got) != 1 || got[0].Amount != amount || got[0].Currency != "eur" && got[0].Currency != "EUR" {
		t.Errorf("provider payments %+v; want one of %d EUR", got, amount)
	}
	if n := s.scalar(s.payment, `select count(*) from waiting_reservations where order_id = $1`, order); n != "0" {
		t.Errorf("%s reservations still waiting", n)
	}
	if n := s.scalar(s.payment, `select count(*) from refused_events where order_id = $1`, order); n != "0" {
		t.Errorf("%s refusals for the order", n)
	}
}

// produce writes the event p as a service's relay would: built and
// validated through the contract, keyed by its partition key, to its
// type's topic under the deployment's prefix.
func (s *saga) produce(p contract.Payload) string {
	s.t.Helper()
	_, rec, err := s.writer.Prepare(outbox.Event{Payload: p})
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := s.kafka.Client(s.t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: rec.Topic, Key: []byte(rec.PartitionKey), Value: rec.Payload}).FirstErr(); err != nil {
		s.t.Fatal(err)
	}
	return rec.EventID
}

// waitRefused waits until the service's database holds exactly the
// refusal want ("type reason") for the order.
func (s *saga) waitRefused(pool *pgxpool.Pool, order, want string) {
	s.t.Helper()
	eventually(s.t, 30*time.Second, "refusal "+want, func() error {
		got := s.scalar(pool, `select string_agg(event_type || ' ' || reason, ', ' order by id) from refused_events
			where order_id = $1 and resolved_at is null`, order)
		if got != want {
			return fmt.Errorf("refusals %q", got)
		}
		return nil
	})
}

// counter is the service's concord_contradicting_events_total with labels.
func (s *saga) counter(base string, labels map[string]string) float64 {
	s.t.Helper()
	return testkit.Scrape(s.t, base+"/metrics").Value("concord_contradicting_events_total", labels)
}

// providerPayments are the PaymentIntents provider-sim holds for the
// order (by the order id payment-svc puts in their metadata).
func (s *saga) providerPayments(order string) []paymentprovider.Payment {
	s.t.Helper()
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: apiKey, BaseURL: s.simURL})
	if err != nil {
		s.t.Fatal(err)
	}
	var out []paymentprovider.Payment
	cursor := ""
	for {
		page, err := gw.ListCreated(context.Background(), time.Now().Add(-time.Hour), time.Now().Add(time.Minute), cursor, 100)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, p := range page.Items {
			if p.Metadata["order_id"] == order {
				out = append(out, p)
			}
		}
		if !page.HasMore {
			return out
		}
		cursor = page.Next
	}
}
