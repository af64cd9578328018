package paymentconsumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/payment/paymentconsumer"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

func newDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate)
}

func event(typ, data string) idempotent.Event {
	return idempotent.Event{Envelope: schemas.Envelope{EventID: schemas.NewEventID(), EventType: typ, EventVersion: 1, Data: json.RawMessage(data)}}
}

// batchHandler is the service's batch handler with the saga's handlers,
// applied in a transaction of the test's with what it emits written.
func batchHandler(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error {
	var mux idempotent.Mux
	paymentconsumer.Register(&mux)
	return outbox.Writer{}.Emitting(ctx, tx, func(out outbox.Emitter) error {
		return paymentconsumer.BatchHandler(&mux)(ctx, tx, evs, out)
	})
}

func reserved(order string) idempotent.Event {
	return event("inventory.reserved", `{"order_id":"`+order+`","amount":1500,"currency":"EUR","customer_id":"c-1"}`)
}

func cancelled(order string) idempotent.Event {
	return event("order.cancelled", `{"order_id":"`+order+`","reason":"timeout"}`)
}

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
	evs := []idempotent.Event{reserved(charged), reserved(thenGone), event("order.created", `{}`), cancelled(thenGone),
		cancelled(goneFirst), reserved(goneFirst)}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return batchHandler(ctx, tx, evs) }); err != nil {
		t.Fatal(err)
	}
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
	for _, data := range []string{`not JSON`, `{"order_id":"0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d09","amount":100}`} {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return batchHandler(ctx, tx, []idempotent.Event{event("inventory.reserved", data)})
		})
		if !idempotent.IsPermanent(err) {
			t.Fatalf("reservation %s: err = %v; want a permanent failure", data, err)
		}
	}
}
