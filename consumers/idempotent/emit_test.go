package idempotent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// orderCreatedV1 is an order.created v1 envelope (closed data, no seq).
func orderCreatedV1(t testing.TB, key string) (id string, value []byte) {
	t.Helper()
	id = schemas.NewEventID()
	data, _ := json.Marshal(contract.OrderCreatedV1{OrderID: schemas.NewEventID(), CustomerID: key, Currency: "EUR",
		TotalAmount: 100, Items: []contract.OrderCreatedV1Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: 100}}})
	b, err := schemas.Envelope{EventID: id, EventType: "order.created", EventVersion: 1, Timestamp: time.Now(),
		AggregateType: "order", AggregateID: key, CorrelationID: key, Data: data}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return id, b
}

// What a handler emits is written to the outbox in the transaction of its
// effect, under the runner's topic prefix, with the event that caused it
// named; an event whose handler fails permanently after emitting is
// dead-lettered with nothing of it written. A typed handler of
// order.created v2 also reads the v1 events of the topic.
func TestHandlerEventsCommitWithTheEffectAndOnlyThen(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrateWithOutbox(t, pool)
	topic := k.CreateTopic(t, "emit", 1)
	cl := k.Client(t)

	okA, vA := event(t, "a", 1)
	okB, vB := orderCreatedV1(t, "b")
	bad, vBad := event(t, "refuse", 2)
	produce(t, cl, record(topic, "a", okA, vA), record(topic, "refuse", bad, vBad), record(topic, "b", okB, vB))

	var mux idempotent.Mux
	idempotent.Handle(&mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.OrderCreatedV2, out outbox.Emitter) error {
		if _, err := out.Emit(outbox.CausedBy(ev.Envelope, contract.OrderConfirmedV1{OrderID: d.OrderID, Currency: d.Currency, TotalAmount: &d.TotalAmount})); err != nil {
			return err
		}
		if d.CustomerID == "refuse" {
			return idempotent.Permanent(errors.New("refused after emitting"))
		}
		_, err := tx.Exec(ctx, `INSERT INTO effects (event_id, key, seq, topic, partition, "offset") VALUES ($1,$2,0,$3,$4,$5)`,
			ev.EventID, string(ev.Key), ev.Topic, ev.Partition, ev.Offset)
		return err
	})
	group := testkit.UniqueName(t, "g")
	start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k),
		Handler: mux.Handle, Types: mux.Types(), Outbox: outbox.Writer{TopicPrefix: "t1."}})

	eventually(t, 60*time.Second, "two applied, one dead-lettered",
		countIs(t, pool, 3, `SELECT (SELECT count(*) FROM effects) + (SELECT count(*) FROM dead_letters WHERE consumer_group = $1)`, group))
	rows, err := pool.Query(context.Background(), `SELECT topic, event_type, payload FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Topic, Type string
		Payload     []byte
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d outbox rows, want 2: one per applied event, none for the dead-lettered one", len(got))
	}
	causes := map[string]bool{}
	for _, r := range got {
		env, err := schemas.DecodeEnvelope(r.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if r.Topic != "t1.order-events" || r.Type != string(contract.TypeOrderConfirmed) {
			t.Errorf("row on %s of type %s, want t1.order-events order.confirmed", r.Topic, r.Type)
		}
		causes[env.CausationID] = true
	}
	if !causes[okA] || !causes[okB] || causes[bad] {
		t.Fatalf("emitted events caused by %v; want %s (v2) and %s (v1), not %s", causes, okA, okB, bad)
	}
}

// A Mux refuses, as a permanent failure, a version none of its handlers can
// read; types it has no handler for are no business of it.
func TestMuxRefusesVersionsItsHandlersCannotRead(t *testing.T) {
	var mux idempotent.Mux
	called := 0
	idempotent.Handle(&mux, func(context.Context, pgx.Tx, idempotent.Event, contract.OrderCreatedV1, outbox.Emitter) error {
		called++
		return nil
	})
	ev := func(typ string, v int) idempotent.Event {
		return idempotent.Event{Envelope: schemas.Envelope{EventID: "e", EventType: typ, EventVersion: v,
			Data: json.RawMessage(`{"order_id":"o","customer_id":"c","items":[],"total_amount":1,"currency":"EUR"}`)}}
	}
	if err := mux.Handle(context.Background(), nil, ev("order.created", 1), nil); err != nil || called != 1 {
		t.Fatalf("v1 to a v1 reader: %v (called %d)", err, called)
	}
	err := mux.Handle(context.Background(), nil, ev("order.created", 2), nil)
	if !errors.Is(err, contract.ErrMismatch) || idempotent.Classify(err) != idempotent.PermanentFailure {
		t.Fatalf("v2 to a v1 reader: %v, want a permanent ErrMismatch", err)
	}
	if err := mux.Handle(context.Background(), nil, ev("payment.failed", 1), nil); err != nil || called != 1 {
		t.Fatalf("an unhandled type: %v (called %d)", err, called)
	}
	if got := mux.Types(); len(got) != 1 || got[0] != contract.TypeOrderCreated {
		t.Fatalf("Types() = %v", got)
	}
}

// With several readers of a type registered, an event goes to the handler
// of its exact version, else to one whose version can read it — never to
// one that cannot.
func TestMuxPicksTheReaderOfTheEventsVersion(t *testing.T) {
	var mux idempotent.Mux
	var got []int
	idempotent.Handle(&mux, func(_ context.Context, _ pgx.Tx, _ idempotent.Event, _ contract.OrderCreatedV1, _ outbox.Emitter) error {
		got = append(got, 1)
		return nil
	})
	idempotent.Handle(&mux, func(_ context.Context, _ pgx.Tx, _ idempotent.Event, _ contract.OrderCreatedV3, _ outbox.Emitter) error {
		got = append(got, 3)
		return nil
	})
	for _, v := range []int{1, 2, 3} {
		ev := idempotent.Event{Envelope: schemas.Envelope{EventID: "e", EventType: "order.created", EventVersion: v,
			Data: json.RawMessage(`{"order_id":"o","customer_id":"c","items":[],"total_amount":1,"currency":"EUR"}`)}}
		if err := mux.Handle(context.Background(), nil, ev, nil); err != nil {
			t.Fatalf("order.created v%d: %v", v, err)
		}
	}
	if fmt.Sprint(got) != "[1 3 3]" {
		t.Fatalf("v1, v2, v3 went to the readers %v; want [1 3 3]: v1 to its own, v2 to v3 (the v1 reader cannot read it), v3 to its own", got)
	}
}
