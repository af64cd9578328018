package orderconsumer_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/order/orderconsumer"
	"github.com/concordhq/concord/services/order/orderstore"
)

func newStore(t *testing.T) (*pgxpool.Pool, *orderstore.Store) {
	t.Helper()
	pool := testkit.NewPool(t, outbox.Migrate, orderstore.Migrate)
	return pool, &orderstore.Store{Pool: pool}
}

func event(typ, data string) idempotent.Event {
	return idempotent.Event{Envelope: schemas.Envelope{EventID: schemas.NewEventID(), EventType: typ, EventVersion: 1, Data: json.RawMessage(data)}}
}

func handle(ctx context.Context, pool *pgxpool.Pool, evs ...idempotent.Event) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return outbox.Writer{}.Emitting(ctx, tx, func(out outbox.Emitter) error { return orderconsumer.BatchHandler()(ctx, tx, evs, out) })
	})
}

// A batch is applied as a whole; events of types the order service does
// not consume (it shares payment-events with others) and signals for
// orders it does not have are skipped without error, as the per-event
// Mux skips them.
func TestBatchHandlerSkipsWhatIsNotTheOrderServices(t *testing.T) {
	pool, store := newStore(t)
	ctx := context.Background()
	o, _, err := store.Create(ctx, order.Request{CustomerID: "c-1", Currency: "EUR",
		Items: []order.Item{{SKU: "sku-1", Quantity: 1, UnitPrice: 2500}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	ref := `{"order_id": "` + o.ID + `"}`
	err = handle(ctx, pool,
		event("inventory.reserved", ref),
		event("payment.failed", `not even JSON`),
		event("payment.processed", `{"order_id": "00000000-0000-7000-8000-0000000000ff"}`),
		event("payment.processed", ref))
	if err != nil {
		t.Fatal(err)
	}
	if o, err = store.Get(ctx, o.ID); err != nil || o.Status != order.StatusConfirmed || len(o.History) != 3 {
		t.Fatalf("order after the batch: %+v, %v; want CONFIRMED after PENDING and RESERVED", o, err)
	}
	if n := testkit.Count(t, pool, `select count(*) from outbox where event_type = 'order.confirmed'`); n != 1 {
		t.Fatalf("%d order.confirmed events, want 1", n)
	}
}

// An event the service consumes but cannot read fails permanently, so the
// runner redoes the batch one event at a time and dead-letters just that
// event.
func TestBatchHandlerFailsPermanentlyOnAnUnreadableEvent(t *testing.T) {
	pool, _ := newStore(t)
	ctx := context.Background()
	for _, data := range []string{`not even JSON`, `{"order_id": "not-a-uuid"}`, `{}`} {
		err := handle(ctx, pool, event("inventory.reserved", data))
		if err == nil || idempotent.Classify(err) != idempotent.PermanentFailure {
			t.Errorf("inventory.reserved with data %s: %v, want a permanent error", data, err)
		}
	}
}
