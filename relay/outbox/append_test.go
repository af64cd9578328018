package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// orderCreated is an order.created whose total_amount carries seq.
func orderCreated(orderID string, seq int) contract.OrderCreatedV2 {
	return contract.OrderCreatedV2{
		OrderID: orderID, CustomerID: "cus_1", Currency: "EUR", TotalAmount: int64(seq),
		Items: []contract.OrderCreatedV2Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: 100}},
	}
}

func newDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testkit.NewPool(t)
	ctx := context.Background()
	if err := outbox.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, pool); err != nil { // idempotent at every start-up
		t.Fatalf("second migrate: %v", err)
	}
	if _, err := pool.Exec(ctx, "create table orders (id text primary key)"); err != nil {
		t.Fatal(err)
	}
	return pool
}

func TestAppendFillsTheEnvelopeFromTheCatalog(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	orderID := uuid.NewString()
	var env schemas.Envelope
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		env, err = outbox.Append(ctx, tx, outbox.Event{Payload: orderCreated(orderID, 1),
			Headers: map[string]string{schemas.HeaderTraceparent: "00-abc-def-01"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := uuid.Parse(env.EventID); err != nil || v.Version() != 7 {
		t.Fatalf("event id %q: want a UUIDv7 (%v)", env.EventID, err)
	}
	if env.EventVersion != 2 || env.AggregateType != "order" || env.AggregateID != orderID || env.CorrelationID != orderID {
		t.Fatalf("envelope %+v: want latest version 2, aggregate order/%s, correlation defaulting to the aggregate", env, orderID)
	}
	var (
		topic, key, typ string
		version         int
		hash            int32
		payload         []byte
		headers         map[string]string
	)
	err = pool.QueryRow(ctx, `select topic, partition_key, event_type, event_version, key_hash, payload::text, headers
		from outbox where event_id = $1`, env.EventID).Scan(&topic, &key, &typ, &version, &hash, &payload, &headers)
	if err != nil {
		t.Fatal(err)
	}
	if topic != "order-events" || key != orderID || typ != "order.created" || version != 2 || hash != outbox.KeyHash(orderID) {
		t.Fatalf("row: topic %s key %s type %s v%d hash %d", topic, key, typ, version, hash)
	}
	if headers[schemas.HeaderTraceparent] != "00-abc-def-01" {
		t.Fatalf("headers %v: traceparent lost", headers)
	}
	if err := schemas.MustDefault().Validate(payload); err != nil {
		t.Fatalf("stored payload does not validate: %v", err)
	}
	var back schemas.Envelope
	if err := json.Unmarshal(payload, &back); err != nil || back.EventID != env.EventID {
		t.Fatalf("stored payload %s: %v", payload, err)
	}
}

func TestAppendOfASchemaInvalidEventRollsBackTheBusinessChange(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	orderID := uuid.NewString()
	bad := orderCreated(orderID, 1)
	bad.Currency = "euro" // pattern ^[A-Z]{3}$
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "insert into orders (id) values ($1)", orderID); err != nil {
			return err
		}
		_, err := outbox.Append(ctx, tx, outbox.Event{Payload: bad})
		return err
	})
	var ve *schemas.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, outbox.ErrInvalidEvent) {
		t.Fatalf("got %v, want an ErrInvalidEvent wrapping *schemas.ValidationError", err)
	}
	if ve.Pointer != "/data/currency" || ve.Rule != "pattern" {
		t.Fatalf("validation error %+v: want /data/currency pattern", ve)
	}
	var orders, rows int
	if err := pool.QueryRow(ctx, "select (select count(*) from orders), (select count(*) from outbox)").Scan(&orders, &rows); err != nil {
		t.Fatal(err)
	}
	if orders != 0 || rows != 0 {
		t.Fatalf("after the refused append: %d orders, %d outbox rows; want none", orders, rows)
	}
}

// Payloads from outside the generated contract: what a hand-written type
// might claim.
type teleported struct{}

func (teleported) EventType() contract.Type { return "order.teleported" }
func (teleported) EventVersion() int        { return 1 }
func (teleported) PartitionKey() string     { return "x" }

type orderCreatedV9 struct{ contract.OrderCreatedV2 }

func (orderCreatedV9) EventVersion() int { return 9 }

func TestAppendRefusesUnknownTypesAndMissingKeys(t *testing.T) {
	cases := []struct {
		name string
		ev   outbox.Event
	}{
		{"no payload", outbox.Event{}},
		{"unknown type", outbox.Event{Payload: teleported{}}},
		{"unknown version", outbox.Event{Payload: orderCreatedV9{orderCreated(uuid.NewString(), 1)}}},
		{"no key", outbox.Event{Payload: contract.OrderCreatedV2{CustomerID: "c"}}},
		{"data not valid", outbox.Event{Payload: contract.OrderCancelledV1{OrderID: "not-a-uuid", Reason: "r"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := outbox.Prepare(c.ev); !errors.Is(err, outbox.ErrInvalidEvent) {
				t.Fatalf("got %v, want ErrInvalidEvent", err)
			}
		})
	}
}

// Append and Queue insert the row and notify in one statement; the
// notification must still come, at commit.
func TestAppendNotifiesTheRelayOnCommit(t *testing.T) {
	for name, write := range map[string]func(ctx context.Context, tx pgx.Tx) error{
		"Append": func(ctx context.Context, tx pgx.Tx) error {
			_, err := outbox.Append(ctx, tx, outbox.Event{Payload: orderCreated(uuid.NewString(), 1)})
			return err
		},
		"Queue": func(ctx context.Context, tx pgx.Tx) error {
			var b pgx.Batch
			if _, err := (outbox.Writer{}).Queue(&b, outbox.Event{Payload: orderCreated(uuid.NewString(), 1)}); err != nil {
				return err
			}
			return tx.SendBatch(ctx, &b).Close()
		},
	} {
		t.Run(name, func(t *testing.T) {
			pool := newDB(t)
			ctx, conn := listening(t, pool)
			if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return write(ctx, tx) }); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
				t.Fatalf("no notification after commit: %v", err)
			}
		})
	}
}

// A Writer with NoWake appends through every path without a NOTIFY: the
// first notification a listener gets after those commits is the marker
// committed after them.
func TestNoWakeAppendsWithoutNotifying(t *testing.T) {
	w := outbox.Writer{NoWake: true}
	pool := newDB(t)
	ctx, conn := listening(t, pool)
	ev := func() outbox.Event { return outbox.Event{Payload: orderCreated(uuid.NewString(), 1)} }
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := w.Append(ctx, tx, ev()); err != nil {
			return err
		}
		var b pgx.Batch
		if _, err := w.Queue(&b, ev()); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		return w.Emitting(ctx, tx, func(out outbox.Emitter) error {
			_, err := out.Emit(ev())
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := pool.QueryRow(ctx, "select count(*) from outbox").Scan(&rows); err != nil || rows != 3 {
		t.Fatalf("%d rows appended, want 3 (%v)", rows, err)
	}
	if _, err := pool.Exec(ctx, "select pg_notify($1, 'marker')", outbox.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Conn().WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != "marker" {
		t.Fatalf("a NoWake append notified (payload %q)", n.Payload)
	}
}

func TestRetryAndSkipOnlyTouchParkedRows(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	if err := outbox.Retry(ctx, pool, 42); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("retry of a missing row: %v, want ErrNotFound", err)
	}
	var env schemas.Envelope
	_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
		env, err = outbox.Append(ctx, tx, outbox.Event{Payload: orderCreated(uuid.NewString(), 1)})
		return err
	})
	var id int64
	if err := pool.QueryRow(ctx, "select id from outbox where event_id = $1", env.EventID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := outbox.Skip(ctx, pool, id, "x"); !errors.Is(err, outbox.ErrNotParked) {
		t.Fatalf("skip of a pending row: %v, want ErrNotParked", err)
	}
	if err := outbox.Skip(ctx, pool, id, " "); !errors.Is(err, outbox.ErrReasonRequired) {
		t.Fatalf("skip without reason: %v", err)
	}
	if _, err := pool.Exec(ctx, "update outbox set parked_at = now(), attempts = 5, last_error = 'boom' where id = $1", id); err != nil {
		t.Fatal(err)
	}
	parked, err := outbox.Parked(ctx, pool)
	if err != nil || len(parked) != 1 || parked[0].ID != id || parked[0].LastError != "boom" {
		t.Fatalf("parked = %+v, %v", parked, err)
	}
	if err := outbox.Retry(ctx, pool, id); err != nil {
		t.Fatal(err)
	}
	var attempts int
	var parkedAt *time.Time
	if err := pool.QueryRow(ctx, "select attempts, parked_at from outbox where id = $1", id).Scan(&attempts, &parkedAt); err != nil {
		t.Fatal(err)
	}
	if attempts != 0 || parkedAt != nil {
		t.Fatalf("after retry: attempts %d parked_at %v", attempts, parkedAt)
	}
}

// Saga events of other prefixes belong to the order aggregate: the catalog,
// not the type's prefix, decides; a Writer's prefix routes to another topic.
func TestAppendTakesTheAggregateTypeFromTheCatalogAndHonoursATopicPrefix(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	orderID := uuid.NewString()
	var env schemas.Envelope
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		env, err = outbox.Writer{TopicPrefix: "run42."}.Append(ctx, tx, outbox.Event{Payload: contract.PaymentProcessedV1{
			OrderID: orderID, PaymentID: "pay_1", ProviderPaymentID: "pi_1", Amount: 100, Currency: "EUR"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if env.AggregateType != "order" {
		t.Fatalf("aggregate type %q, want the catalog's order", env.AggregateType)
	}
	var topic string
	if err := pool.QueryRow(ctx, `select topic from outbox where event_id = $1`, env.EventID).Scan(&topic); err != nil || topic != "run42.payment-events" {
		t.Fatalf("topic %q (%v), want the prefixed catalog topic", topic, err)
	}
}

// listening holds a connection of pool that listens on the relays'
// channel, and a context for the test's waits.
func listening(t *testing.T, pool *pgxpool.Pool) (context.Context, *pgxpool.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(ctx, "listen "+outbox.NotifyChannel); err != nil {
		t.Fatal(err)
	}
	return ctx, conn
}
