package paymentconsumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/internal/contradiction"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentconsumer"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

func newDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate)
}

// event is a raw event, for payloads the contract cannot build (poison).
func event(typ, data string) idempotent.Event {
	return idempotent.Event{Envelope: schemas.Envelope{EventID: schemas.NewEventID(), EventType: typ, EventVersion: 1, Data: json.RawMessage(data)}}
}

// typed is the event a producer of p writes, built and validated through
// the contract as outbox.Writer does.
func typed(t *testing.T, p contract.Payload) idempotent.Event {
	t.Helper()
	env, _, err := outbox.Prepare(outbox.Event{Payload: p})
	if err != nil {
		t.Fatal(err)
	}
	return idempotent.Event{Envelope: env}
}

// apply runs the service's batch handler with the saga's handlers over
// evs in a transaction of the test's, with what it emits written.
func apply(t *testing.T, pool *pgxpool.Pool, checks *paymentconsumer.Checks, evs ...idempotent.Event) {
	t.Helper()
	ctx := context.Background()
	var mux idempotent.Mux
	paymentconsumer.Register(&mux, checks)
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return outbox.Writer{}.Emitting(ctx, tx, func(out outbox.Emitter) error {
			return paymentconsumer.BatchHandler(&mux, checks)(ctx, tx, evs, out)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func created(t *testing.T, order string, amount int64) idempotent.Event {
	return typed(t, contract.OrderCreatedV3{OrderID: order, CustomerID: "c-1", TotalAmount: amount, Currency: "EUR",
		Items: []contract.OrderCreatedV3Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: amount}}})
}

func reserved(t *testing.T, order string, amount int64) idempotent.Event {
	return typed(t, contract.InventoryReservedV2{OrderID: order, ReservationID: schemas.NewEventID(),
		Items: []contract.InventoryReservedV2Item{{SKU: "SKU-1", Quantity: 1}}, Amount: &amount, Currency: "EUR", CustomerID: "c-1"})
}

func confirmed(t *testing.T, order string) idempotent.Event {
	return typed(t, contract.OrderConfirmedV1{OrderID: order})
}

func cancelled(t *testing.T, order string) idempotent.Event {
	return typed(t, contract.OrderCancelledV1{OrderID: order, Reason: "timeout"})
}

// refusals is the order's open refused_events as "type reason".
func refusals(t *testing.T, pool *pgxpool.Pool, order string) []string {
	t.Helper()
	open, err := contradiction.List(context.Background(), pool, order)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range open {
		out = append(out, r.EventType+" "+r.Reason)
	}
	return out
}

// counted reads concord_contradicting_events_total for payment-svc.
func counted(t *testing.T, typ, reason string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := contradiction.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	return testkit.Gather(t, reg).Value("concord_contradicting_events_total", map[string]string{"service": "payment-svc", "type": typ, "reason": reason})
}

func waitingCount(t *testing.T, pool *pgxpool.Pool, order string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `select count(*) from waiting_reservations where order_id = $1`, order).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var long = &paymentconsumer.Checks{UnknownOrderWait: time.Hour}

// Reservations are written together, but a cancellation later in the
// same batch still sees the intent it must mark for refund, and a
// reservation after its order's cancellation creates no charge: the batch
// ends as if applied one event at a time.
func TestBatchHandlerKeepsOffsetOrderAroundCancellations(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	const (
		charged   = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d01"
		thenGone  = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d02"
		goneFirst = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d03"
	)
	apply(t, pool, long, created(t, charged, 1500), created(t, thenGone, 1500), created(t, goneFirst, 1500))
	apply(t, pool, long, reserved(t, charged, 1500), reserved(t, thenGone, 1500), event("shipping.create_shipment", `{}`),
		cancelled(t, thenGone), cancelled(t, goneFirst), reserved(t, goneFirst, 1500))
	p, err := paymentstore.ByOrder(ctx, pool, charged)
	if err != nil || p.Amount != 1500 || p.PaymentMethod != paymentconsumer.DefaultPaymentMethod || p.OrderCancelled {
		t.Fatalf("intent of a live order: %+v, %v", p, err)
	}
	if p, err := paymentstore.ByOrder(ctx, pool, thenGone); err != nil || !p.OrderCancelled {
		t.Fatalf("intent of an order cancelled later in the batch: %+v, %v; want it marked cancelled (refund if paid)", p, err)
	}
	if _, err := paymentstore.ByOrder(ctx, pool, goneFirst); !errors.Is(err, paymentstore.ErrNotFound) {
		t.Fatalf("an order cancelled before its reservation got an intent: %v", err)
	}
}

// An unreadable reservation fails its batch permanently, so the runner
// redoes the batch one event at a time and dead-letters only that one.
func TestBatchHandlerRefusesUnreadableReservations(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	var mux idempotent.Mux
	paymentconsumer.Register(&mux, nil)
	for _, data := range []string{`not JSON`, `{"order_id":"0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d09","amount":100}`} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return outbox.Writer{}.Emitting(ctx, tx, func(out outbox.Emitter) error {
				return paymentconsumer.BatchHandler(&mux, nil)(ctx, tx, []idempotent.Event{event("inventory.reserved", data)}, out)
			})
		})
		if !idempotent.IsPermanent(err) {
			t.Fatalf("reservation %s: err = %v; want a permanent failure", data, err)
		}
	}
}

// A schema-valid inventory.reserved for an order payment-svc never learned
// about (no order.created) creates no intent, so the charger never calls
// the provider: it waits, acknowledged, and is refused as unknown_order
// once the wait is over, recorded and counted.
func TestAReservationForAnUnknownOrderIsRefusedAfterTheWaitAndChargesNothing(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	const order = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d11"
	checks := &paymentconsumer.Checks{UnknownOrderWait: 300 * time.Millisecond}
	before := counted(t, "inventory.reserved", payment.ReasonUnknownOrder)
	forged := reserved(t, order, 99_00)
	apply(t, pool, checks, forged)
	if _, err := paymentstore.ByOrder(ctx, pool, order); !errors.Is(err, paymentstore.ErrNotFound) {
		t.Fatalf("a reservation for an unknown order got an intent: %v", err)
	}
	if n := waitingCount(t, pool, order); n != 1 {
		t.Fatalf("%d reservations waiting for the order; want 1", n)
	}
	if n, err := paymentconsumer.RefuseOverdueReservations(ctx, pool, checks); err != nil || n != 0 {
		t.Fatalf("sweep before the wait: %d settled, %v; want 0", n, err)
	}
	testkit.Eventually(t, 10*time.Second, "the reservation refused after the wait", func() error {
		if _, err := paymentconsumer.RefuseOverdueReservations(ctx, pool, checks); err != nil {
			return err
		}
		if got := refusals(t, pool, order); len(got) != 1 || got[0] != "inventory.reserved unknown_order" {
			return errors.New("refusals: " + join(got))
		}
		return nil
	})
	if _, err := paymentstore.ByOrder(ctx, pool, order); !errors.Is(err, paymentstore.ErrNotFound) {
		t.Fatalf("a refused reservation got an intent: %v", err)
	}
	if due, err := paymentstore.ClaimCharges(ctx, pool, 10, time.Second); err != nil || len(due) != 0 {
		t.Fatalf("charges due: %v, %v; want none", due, err)
	}
	if n := waitingCount(t, pool, order); n != 0 {
		t.Fatalf("%d reservations still waiting after the refusal", n)
	}
	if got := counted(t, "inventory.reserved", payment.ReasonUnknownOrder); got != before+1 {
		t.Fatalf("concord_contradicting_events_total = %v; want %v", got, before+1)
	}
	// The order arriving after the refusal charges nothing either: the
	// refusal stands until a person resolves it.
	apply(t, pool, checks, created(t, order, 99_00))
	if _, err := paymentstore.ByOrder(ctx, pool, order); !errors.Is(err, paymentstore.ErrNotFound) {
		t.Fatalf("an order arriving after its reservation was refused got an intent: %v", err)
	}
}

// A reservation may overtake its order (they travel on different topics):
// it waits and is charged, with the order's amount, when order.created
// arrives, in a later batch or later in the same one.
func TestAReservationBeforeItsOrderIsChargedWhenTheOrderArrives(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	const later, sameBatch = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d21", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d22"
	apply(t, pool, long, reserved(t, later, 1500))
	if _, err := paymentstore.ByOrder(ctx, pool, later); !errors.Is(err, paymentstore.ErrNotFound) {
		t.Fatalf("charged before the order was known: %v", err)
	}
	apply(t, pool, long, created(t, later, 1500))
	apply(t, pool, long, reserved(t, sameBatch, 700), created(t, sameBatch, 700))
	for order, amount := range map[string]int64{later: 1500, sameBatch: 700} {
		p, err := paymentstore.ByOrder(ctx, pool, order)
		if err != nil || p.Amount != amount || p.Currency != "EUR" || p.CustomerID != "c-1" {
			t.Errorf("order %s: intent %+v, %v; want %d EUR of c-1", order, p, err, amount)
		}
		if n := waitingCount(t, pool, order); n != 0 {
			t.Errorf("order %s: %d reservations still waiting", order, n)
		}
		if got := refusals(t, pool, order); len(got) != 0 {
			t.Errorf("order %s: refusals %v", order, got)
		}
	}
	// The sweeper has nothing left to refuse.
	if n, err := paymentconsumer.RefuseOverdueReservations(ctx, pool, &paymentconsumer.Checks{}); err != nil || n != 0 {
		t.Fatalf("sweep: %d settled, %v; want 0", n, err)
	}
}

// A reservation that asks for another amount than its order's total is
// refused (amount_mismatch), whether the order was known first or arrives
// after it; the genuine reservation is still charged.
func TestAReservationContradictingItsOrderIsRefused(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	const knownFirst, arrivesLater = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d31", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d32"
	before := counted(t, "inventory.reserved", payment.ReasonAmountMismatch)
	apply(t, pool, long, created(t, knownFirst, 1500), reserved(t, knownFirst, 150_000))
	apply(t, pool, long, reserved(t, arrivesLater, 1))
	apply(t, pool, long, created(t, arrivesLater, 1500))
	for _, order := range []string{knownFirst, arrivesLater} {
		if _, err := paymentstore.ByOrder(ctx, pool, order); !errors.Is(err, paymentstore.ErrNotFound) {
			t.Errorf("order %s: a reservation with another amount got an intent: %v", order, err)
		}
		if got := refusals(t, pool, order); len(got) != 1 || got[0] != "inventory.reserved amount_mismatch" {
			t.Errorf("order %s: refusals %v; want one amount_mismatch", order, got)
		}
	}
	if got := counted(t, "inventory.reserved", payment.ReasonAmountMismatch); got != before+2 {
		t.Errorf("concord_contradicting_events_total = %v; want %v", got, before+2)
	}
	apply(t, pool, long, reserved(t, knownFirst, 1500))
	if p, err := paymentstore.ByOrder(ctx, pool, knownFirst); err != nil || p.Amount != 1500 {
		t.Fatalf("the genuine reservation: %+v, %v; want an intent of 1500", p, err)
	}
}

// An order.cancelled for an order order-svc confirmed is refused: the
// payment is not marked for refund and the cancellation goes to review
// (order_confirmed). A cancellation of an order that was not confirmed
// still marks its paid payment for refund.
func TestACancellationOfAConfirmedOrderRefundsNothingAndGoesToReview(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	const kept, refunded = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d41", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d42"
	before := counted(t, "order.cancelled", payment.ReasonOrderConfirmed)
	apply(t, pool, long, created(t, kept, 1500), created(t, refunded, 1500), reserved(t, kept, 1500), reserved(t, refunded, 1500))
	for _, order := range []string{kept, refunded} {
		p, err := paymentstore.ByOrder(ctx, pool, order)
		if err != nil {
			t.Fatal(err)
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := paymentstore.AttachProvider(ctx, tx, p.ID, "pi_"+order); err != nil {
				return err
			}
			_, err := paymentstore.MarkPaid(ctx, tx, outbox.Writer{}, p.ID, "succeeded", "test")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	apply(t, pool, long, confirmed(t, kept))
	apply(t, pool, long, cancelled(t, kept), cancelled(t, refunded))

	p, err := paymentstore.ByOrder(ctx, pool, kept)
	if err != nil || p.OrderCancelled || p.Status != payment.StatusPaid {
		t.Fatalf("payment of the confirmed order: %+v, %v; want paid and not marked cancelled", p, err)
	}
	if due, err := paymentstore.ClaimRefunds(ctx, pool, 10, time.Second); err != nil || len(due) != 1 || due[0].OrderID != refunded {
		t.Fatalf("refunds due: %+v, %v; want only order %s's", due, err, refunded)
	}
	if got := refusals(t, pool, kept); len(got) != 1 || got[0] != "order.cancelled order_confirmed" {
		t.Fatalf("refusals of the confirmed order: %v; want one order_confirmed", got)
	}
	if got := refusals(t, pool, refunded); len(got) != 0 {
		t.Fatalf("refusals of the cancelled order: %v; want none", got)
	}
	if got := counted(t, "order.cancelled", payment.ReasonOrderConfirmed); got != before+1 {
		t.Fatalf("concord_contradicting_events_total = %v; want %v", got, before+1)
	}
	// A reservation arriving for the confirmed order later still finds its
	// intent and changes nothing.
	apply(t, pool, long, reserved(t, kept, 1500))
	if p2, err := paymentstore.ByOrder(ctx, pool, kept); err != nil || p2.ID != p.ID || p2.Status != payment.StatusPaid {
		t.Fatalf("payment after a repeated reservation: %+v, %v", p2, err)
	}
}

// An order.confirmed for an order payment-svc never learned about is
// recorded as unknown_order and changes nothing.
func TestAConfirmationOfAnUnknownOrderIsRefused(t *testing.T) {
	pool := newDB(t)
	const order = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d51"
	apply(t, pool, long, confirmed(t, order))
	if got := refusals(t, pool, order); len(got) != 1 || got[0] != "order.confirmed unknown_order" {
		t.Fatalf("refusals: %v; want one unknown_order", got)
	}
	// Learning the order afterwards does not make it confirmed: a
	// cancellation still takes effect.
	apply(t, pool, long, created(t, order, 1500), cancelled(t, order))
	var n int
	if err := pool.QueryRow(context.Background(), `select count(*) from cancelled_orders where order_id = $1`, order).Scan(&n); err != nil || n != 1 {
		t.Fatalf("cancelled_orders rows: %d, %v; want 1", n, err)
	}
}

func join(s []string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
