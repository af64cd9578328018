package orderstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/order/orderstore"
)

const (
	orderA  = "00000000-0000-7000-8000-00000000000a"
	orderB  = "00000000-0000-7000-8000-00000000000b"
	orderC  = "00000000-0000-7000-8000-00000000000c"
	unknown = "00000000-0000-7000-8000-0000000000ff" // another deployment's order
)

func eventID(i int) string { return fmt.Sprintf("00000000-0000-7000-9000-%012d", i) }

// newOrders gives a fresh database with orders A, B and C, PENDING.
func newOrders(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testkit.NewPool(t, outbox.Migrate, orderstore.Migrate)
	ctx := context.Background()
	for _, id := range []string{orderA, orderB, orderC} {
		if _, err := pool.Exec(ctx, `insert into orders (id, customer_id, currency, total_amount, items, payment_method, status, request_hash)
			values ($1, 'c-1', 'EUR', 2500, '[]', 'pm_card_visa', 'PENDING', 'h')`, id); err != nil {
			t.Fatal(err)
		}
	}
	return pool
}

// applyBatch applies sigs in one transaction with the consumer's buffered
// appends.
func applyBatch(ctx context.Context, pool *pgxpool.Pool, sigs []orderstore.Signal) (out []orderstore.Outcome, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		buf := outbox.Writer{}.NewBuffer()
		if out, err = orderstore.ApplyBatch(ctx, tx, buf, sigs); err != nil {
			return err
		}
		return buf.Flush(ctx, tx)
	})
	return out, err
}

// state is what applying signals left: each order, its history in order,
// and the events appended.
type state struct{ orders, history, events []string }

func readState(t *testing.T, pool *pgxpool.Pool) state {
	t.Helper()
	read := func(q string) []string { return testkit.Strings(t, pool, q) }
	return state{
		orders: read(`select concat_ws(' ', id, status, coalesce(reason, '-'), case when terminal_at is null then 'open' else 'terminal' end)
			from orders order by id`),
		history: read(`select concat_ws(' ', order_id, status, coalesce(reason, '-'), coalesce(event_id, '-'), event_type)
			from order_history order by id`),
		events: read(`select concat_ws(' ', event_type, aggregate_id, payload->>'correlation_id', coalesce(payload->>'causation_id', '-'),
			(payload->'data')::jsonb::text) from outbox order by id`),
	}
}

// One batch folds its signals through the state machine in offset order:
// an order that moves twice ends in its final status with a history row
// per move, an order of another deployment is skipped, a signal that does
// not apply changes nothing, only a cancellation keeps its reason, and
// each order that ends CONFIRMED or CANCELLED reports it once. Applying
// the same signals one per batch (as the consumer redoes a failed batch)
// ends the same.
func TestApplyBatchEndsAsIfSignalsWereAppliedOneByOne(t *testing.T) {
	sigs := []orderstore.Signal{
		{OrderID: orderA, Signal: order.InventoryReserved, Reason: "dropped", EventID: eventID(1)},              // RESERVED
		{OrderID: unknown, Signal: order.PaymentProcessed, EventID: eventID(2)},                                 // not ours
		{OrderID: orderB, Signal: order.InventoryRejected, Reason: order.ReasonOutOfStock, EventID: eventID(3)}, // CANCELLED
		{OrderID: orderA, Signal: order.PaymentProcessed, EventID: eventID(4)},                                  // CONFIRMED
		{OrderID: orderB, Signal: order.PaymentProcessed, EventID: eventID(5)},                                  // too late
		{OrderID: orderC, Signal: order.InventoryReserved, EventID: eventID(6)},                                 // RESERVED
		{OrderID: orderC, Signal: order.InventoryReserved, EventID: eventID(7)},                                 // a repeat
	}
	moved, stayed, notOurs := orderstore.Outcome{Found: true, Changed: true}, orderstore.Outcome{Found: true}, orderstore.Outcome{}
	wantOut := []orderstore.Outcome{moved, notOurs, moved, moved, stayed, moved, stayed}
	want := state{
		orders: []string{
			orderA + " CONFIRMED - terminal",
			orderB + " CANCELLED out_of_stock terminal",
			orderC + " RESERVED - open",
		},
		history: []string{
			orderA + " RESERVED - " + eventID(1) + " inventory.reserved",
			orderB + " CANCELLED out_of_stock " + eventID(3) + " inventory.rejected",
			orderA + " CONFIRMED - " + eventID(4) + " payment.processed",
			orderC + " RESERVED - " + eventID(6) + " inventory.reserved",
		},
		events: []string{
			fmt.Sprintf(`order.cancelled %[1]s %[1]s %[2]s {"reason": "out_of_stock", "order_id": "%[1]s"}`, orderB, eventID(3)),
			fmt.Sprintf(`order.confirmed %[1]s %[1]s %[2]s {"currency": "EUR", "order_id": "%[1]s", "total_amount": 2500}`, orderA, eventID(4)),
		},
	}
	ctx := context.Background()
	for _, oneByOne := range []bool{false, true} {
		name := "one batch"
		if oneByOne {
			name = "one signal per batch"
		}
		t.Run(name, func(t *testing.T) {
			pool := newOrders(t)
			var out []orderstore.Outcome
			if oneByOne {
				for _, s := range sigs {
					o, err := applyBatch(ctx, pool, []orderstore.Signal{s})
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, o...)
				}
			} else {
				var err error
				if out, err = applyBatch(ctx, pool, sigs); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(out, wantOut) {
				t.Errorf("outcomes %v, want %v", out, wantOut)
			}
			got := readState(t, pool)
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"orders", got.orders, want.orders}, {"history", got.history, want.history}, {"events", got.events, want.events}} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s:\n%s\nwant:\n%s", c.what, strings.Join(c.got, "\n"), strings.Join(c.want, "\n"))
				}
			}
		})
	}
}

// An event that already moved an order is refused by order_history's
// unique event id, named in the error, and classified permanent so the
// consumer dead-letters it instead of retrying forever; in a batch of
// several the error names the repeated event, not the batch's first.
func TestApplyBatchRefusesAnEventAppliedBefore(t *testing.T) {
	pool := newOrders(t)
	ctx := context.Background()
	if _, err := applyBatch(ctx, pool, []orderstore.Signal{{OrderID: orderA, Signal: order.InventoryReserved, EventID: eventID(1)}}); err != nil {
		t.Fatal(err)
	}
	_, err := applyBatch(ctx, pool, []orderstore.Signal{
		{OrderID: orderC, Signal: order.InventoryReserved, EventID: eventID(8)},
		{OrderID: orderA, Signal: order.PaymentProcessed, EventID: eventID(1)},
	})
	want := fmt.Sprintf("order %[1]s → CONFIRMED: order %[1]s: event %[2]s already applied", orderA, eventID(1))
	if err == nil || !strings.Contains(err.Error(), want) || idempotent.Classify(err) != idempotent.PermanentFailure {
		t.Fatalf("repeated event: %v; want a permanent error containing %q", err, want)
	}
	if st := readState(t, pool); len(st.history) != 1 || len(st.events) != 0 {
		t.Fatalf("the refused batch left history %v, events %v", st.history, st.events)
	}
}

// Apply is ApplyBatch of one signal, except that it reports an order it
// cannot find.
func TestApplyReportsAnOrderItDoesNotHave(t *testing.T) {
	pool := newOrders(t)
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := orderstore.Apply(ctx, tx, (&outbox.Buffer{}), unknown, order.PaymentProcessed, "", eventID(1))
		return err
	})
	if !errors.Is(err, orderstore.ErrNotFound) {
		t.Fatalf("apply to an unknown order: %v, want ErrNotFound", err)
	}
}

// The sweeper cancels every stuck order in one batch; its cancellations
// have no cause (no event carried them) and no event id in the history.
func TestCancelStuckCancelsWithoutCause(t *testing.T) {
	pool := newOrders(t)
	ctx := context.Background()
	if _, err := applyBatch(ctx, pool, []orderstore.Signal{{OrderID: orderA, Signal: order.PaymentProcessed, EventID: eventID(1)}}); err != nil {
		t.Fatal(err)
	}
	n, err := (&orderstore.Store{Pool: pool}).CancelStuck(ctx, 0, 100)
	if err != nil || n != 2 {
		t.Fatalf("CancelStuck: %d, %v; want 2 (B and C; A is confirmed)", n, err)
	}
	got := readState(t, pool)
	want := state{
		orders: []string{orderA + " CONFIRMED - terminal", orderB + " CANCELLED timeout terminal", orderC + " CANCELLED timeout terminal"},
		history: []string{
			orderA + " CONFIRMED - " + eventID(1) + " payment.processed",
			orderB + " CANCELLED timeout - timeout",
			orderC + " CANCELLED timeout - timeout",
		},
		events: []string{
			fmt.Sprintf(`order.confirmed %[1]s %[1]s %[2]s {"currency": "EUR", "order_id": "%[1]s", "total_amount": 2500}`, orderA, eventID(1)),
			fmt.Sprintf(`order.cancelled %s %[1]s - {"reason": "timeout", "order_id": "%[1]s"}`, orderB),
			fmt.Sprintf(`order.cancelled %s %[1]s - {"reason": "timeout", "order_id": "%[1]s"}`, orderC),
		},
	}
	if !slices.Equal(got.orders, want.orders) || !slices.Equal(got.history, want.history) || !slices.Equal(got.events, want.events) {
		t.Fatalf("after the sweep:\n%v\nwant:\n%v", got, want)
	}
}

// An orchestrated order asks the orchestrator for its checkout (and says
// nothing the choreographed services act on), waits for the saga's outcome
// without the stuck-order sweeper, and ends without order.* events.
func TestOrchestratedOrderRequestsTheSagaAndEndsOnItsOutcome(t *testing.T) {
	pool := testkit.NewPool(t, outbox.Migrate, orderstore.Migrate)
	ctx := context.Background()
	store := &orderstore.Store{Pool: pool}
	addr := &order.Address{Line1: "1 Main St", City: "Springfield", PostalCode: "12345", Country: "US"}
	req := order.Request{CustomerID: "c-1", Currency: "USD", Items: []order.Item{{SKU: "A", Quantity: 2, UnitPrice: 500}}, ShippingAddress: addr}
	var ids []string
	for _, flow := range []order.Flow{order.FlowOrchestrated, order.FlowOrchestrated, order.FlowChoreographed} {
		req.Flow = flow
		o, _, err := store.Create(ctx, req, "")
		if err != nil || o.Flow != flow {
			t.Fatalf("create %s: %+v %v", flow, o, err)
		}
		ids = append(ids, o.ID)
	}
	events := testkit.Strings(t, pool, `select event_type || ' ' || partition_key || ' ' || (payload->'data'->>'total_amount') from outbox order by id`)
	want := []string{"saga.checkout_requested " + ids[0] + " 1000", "saga.checkout_requested " + ids[1] + " 1000", "order.created " + ids[2] + " 1000"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	// The sweeper cancels only the choreographed one.
	if n, err := store.CancelStuck(ctx, 0, 100); err != nil || n != 1 {
		t.Fatalf("CancelStuck: %d, %v; want 1", n, err)
	}
	if _, err := applyBatch(ctx, pool, []orderstore.Signal{
		{OrderID: ids[0], Signal: order.SagaCompleted, EventID: eventID(1)},
		{OrderID: ids[1], Signal: order.SagaCompensated, Reason: "create_shipment_failed", EventID: eventID(2)},
	}); err != nil {
		t.Fatal(err)
	}
	got := testkit.Strings(t, pool, `select status || ' ' || coalesce(reason, '-') from orders order by array_position($1::uuid[], id)`, ids)
	if !slices.Equal(got, []string{"CONFIRMED -", "CANCELLED create_shipment_failed", "CANCELLED timeout"}) {
		t.Fatalf("orders %v", got)
	}
	if n := testkit.Count(t, pool, `select count(*) from outbox where event_type in ('order.confirmed', 'order.cancelled') and partition_key = any($1)`,
		ids[:2]); n != 0 {
		t.Fatalf("orchestrated orders reported %d order.* outcomes", n)
	}
}
