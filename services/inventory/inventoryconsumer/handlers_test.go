package inventoryconsumer_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/internal/contradiction"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/inventory/inventoryconsumer"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

// stand is an inventory database stocked with 5 of SKU-A, and the
// consumer's batch handler over it.
type stand struct {
	t    *testing.T
	pool *pgxpool.Pool
}

func newStand(t *testing.T) *stand {
	t.Helper()
	pool := testkit.NewPool(t, outbox.Migrate, inventorystore.Migrate)
	if err := inventorystore.Receive(context.Background(), pool, []inventory.Line{{SKU: "SKU-A", Quantity: 5}}); err != nil {
		t.Fatal(err)
	}
	return &stand{t: t, pool: pool}
}

// apply hands the events, built and validated through the contract as a
// producer writes them, to the batch handler in one transaction, as the
// runner does.
func (s *stand) apply(ps ...contract.Payload) {
	s.t.Helper()
	evs := make([]idempotent.Event, len(ps))
	for i, p := range ps {
		env, _, err := outbox.Prepare(outbox.Event{Payload: p})
		if err != nil {
			s.t.Fatal(err)
		}
		evs[i] = idempotent.Event{Envelope: env}
	}
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return outbox.Writer{}.Emitting(ctx, tx, func(out outbox.Emitter) error {
			return inventoryconsumer.BatchHandler()(ctx, tx, evs, out)
		})
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// stock is SKU-A's available/reserved/committed.
func (s *stand) stock() string {
	s.t.Helper()
	st, err := inventorystore.ListStock(context.Background(), s.pool)
	if err != nil {
		s.t.Fatal(err)
	}
	return fmt.Sprintf("%d/%d/%d", st[0].Available, st[0].Reserved, st[0].Committed)
}

func (s *stand) reservation(order string) string {
	return fmt.Sprint(testkit.Strings(s.t, s.pool, `select status from reservations where order_id = $1`, order))
}

func (s *stand) refusals(order string) string {
	s.t.Helper()
	open, err := contradiction.List(context.Background(), s.pool, order)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for _, r := range open {
		out = append(out, r.EventType+" "+r.Reason)
	}
	return fmt.Sprint(out)
}

func (s *stand) emitted(order string) string {
	return fmt.Sprint(testkit.Strings(s.t, s.pool, `select event_type from outbox where partition_key = $1 order by id`, order))
}

func counted(t *testing.T, typ, reason string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := contradiction.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	return testkit.Gather(t, reg).Value("concord_contradicting_events_total", map[string]string{"service": "inventory-svc", "type": typ, "reason": reason})
}

func created(order string, qty int64) contract.OrderCreatedV3 {
	return contract.OrderCreatedV3{OrderID: order, CustomerID: "c-1", TotalAmount: qty * 1000, Currency: "EUR",
		Items: []contract.OrderCreatedV3Item{{SKU: "SKU-A", Quantity: qty, UnitPrice: 1000}}}
}

func processed(order string) contract.PaymentProcessedV1 {
	return contract.PaymentProcessedV1{OrderID: order, PaymentID: "1", ProviderPaymentID: "pi_1", Amount: 2000, Currency: "EUR"}
}

// A forged order.cancelled (or payment.failed) for an order order-svc
// confirmed releases nothing: its stock stays committed, no
// inventory.released is emitted, and the event goes to review as
// order_confirmed. An order that timed out and was paid afterwards (never
// confirmed) is still released on its cancellation.
func TestAReleaseOfAConfirmedOrderGoesToReviewAndMovesNoStock(t *testing.T) {
	s := newStand(t)
	const confirmed, timedOut = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e01", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e02"
	before := counted(t, "order.cancelled", inventory.ReasonOrderConfirmed)
	s.apply(created(confirmed, 2), created(timedOut, 1))
	s.apply(processed(confirmed), processed(timedOut))
	s.apply(contract.OrderConfirmedV1{OrderID: confirmed})
	if got := s.stock(); got != "2/0/3" {
		t.Fatalf("stock %s before the cancellations; want 2/0/3", got)
	}
	s.apply(contract.OrderCancelledV1{OrderID: confirmed, Reason: "timeout"},
		contract.PaymentFailedV1{OrderID: confirmed, PaymentID: "1", Reason: "card_declined"},
		contract.OrderCancelledV1{OrderID: timedOut, Reason: "timeout"})

	if got := s.stock(); got != "3/0/2" {
		t.Errorf("stock %s; want 3/0/2 (only the timed-out order's unit back)", got)
	}
	if got := s.reservation(confirmed); got != "[COMMITTED]" {
		t.Errorf("reservation of the confirmed order %s; want COMMITTED", got)
	}
	if got := s.emitted(confirmed); got != "[inventory.reserved]" {
		t.Errorf("events of the confirmed order %s; want only its reservation", got)
	}
	if got := s.refusals(confirmed); got != "[order.cancelled order_confirmed payment.failed order_confirmed]" {
		t.Errorf("refusals of the confirmed order %s", got)
	}
	if got := s.reservation(timedOut); got != "[RELEASED]" {
		t.Errorf("reservation of the timed-out order %s; want RELEASED", got)
	}
	if got := s.refusals(timedOut); got != "[]" {
		t.Errorf("refusals of the timed-out order %s; want none", got)
	}
	if got := counted(t, "order.cancelled", inventory.ReasonOrderConfirmed); got != before+1 {
		t.Errorf("concord_contradicting_events_total = %v; want %v", got, before+1)
	}
}

// Events for an order inventory-svc never reserved for (no order.created
// seen) move nothing and are each recorded as unknown_order; so is a
// payment.failed for a reservation already committed on payment.processed.
func TestEventsForAnOrderNeverReservedAreRefused(t *testing.T) {
	s := newStand(t)
	const unknown, paid = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e11", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e12"
	s.apply(processed(unknown), contract.PaymentFailedV1{OrderID: unknown, PaymentID: "1", Reason: "x"},
		contract.OrderCancelledV1{OrderID: unknown, Reason: "timeout"}, contract.OrderConfirmedV1{OrderID: unknown})
	if got := s.refusals(unknown); got != "[payment.processed unknown_order payment.failed unknown_order order.cancelled unknown_order order.confirmed unknown_order]" {
		t.Errorf("refusals %s", got)
	}
	if got := s.reservation(unknown); got != "[]" {
		t.Errorf("reservation %s; want none", got)
	}
	s.apply(created(paid, 1), processed(paid))
	s.apply(contract.PaymentFailedV1{OrderID: paid, PaymentID: "1", Reason: "card_declined"})
	if got := s.refusals(paid); got != "[payment.failed payment_succeeded]" {
		t.Errorf("refusals of the paid order %s", got)
	}
	if got := s.stock(); got != "4/0/1" {
		t.Errorf("stock %s; want 4/0/1", got)
	}
	if got := s.emitted(unknown); got != "[]" {
		t.Errorf("events for the unknown order %s; want none", got)
	}
}

// The orchestrated saga's stock is the orchestrator's: its commands are not
// checked (a release_stock still releases), and a choreographed event for
// its order is refused as orchestrated_order.
func TestOrchestratedStockMovesOnlyOnTheOrchestratorsCommands(t *testing.T) {
	s := newStand(t)
	const order = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e21"
	key := order + ":reserve_inventory"
	s.apply(contract.InventoryReserveStockV1{SagaID: order, Step: "reserve_inventory", IdempotencyKey: key, Attempt: 1, OrderID: order,
		Items: []contract.InventoryReserveStockV1Item{{SKU: "SKU-A", Quantity: 2}}})
	s.apply(contract.OrderCancelledV1{OrderID: order, Reason: "timeout"})
	if got := s.stock(); got != "3/2/0" {
		t.Fatalf("stock %s after a choreographed cancellation; want 3/2/0", got)
	}
	if got := s.refusals(order); got != "[order.cancelled orchestrated_order]" {
		t.Fatalf("refusals %s", got)
	}
	s.apply(contract.InventoryReleaseStockV1{SagaID: order, Step: "reserve_inventory", IdempotencyKey: key + "_compensate", Attempt: 1,
		OrderID: order, ReservationKey: key, Items: []contract.InventoryReleaseStockV1Item{{SKU: "SKU-A", Quantity: 2}}})
	if got := s.stock(); got != "5/0/0" {
		t.Fatalf("stock %s after release_stock; want 5/0/0", got)
	}
}
