package idempotent_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// A consumer that acts on some types of a shared topic acknowledges the
// others without a dedupe row, validation or a handler call, and its
// offsets move past them; a batch of nothing but those costs no
// transaction. The handled events keep every guarantee.
func TestTypesTheHandlerIgnoresAreOnlyAcknowledged(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrate(t, pool)
	topic := k.CreateTopic(t, "shared", 1)
	cl := k.Client(t)

	confirmed := func(valid bool) *kgo.Record {
		id := schemas.NewEventID()
		data, _ := json.Marshal(map[string]any{"order_id": schemas.NewEventID(), "total_amount": 100, "currency": "EUR"})
		if !valid {
			data = []byte(`{"total_amount": "not a number"}`)
		}
		b, err := schemas.Envelope{EventID: id, EventType: "order.confirmed", EventVersion: 1, Timestamp: time.Now(),
			AggregateType: "order", AggregateID: "k", CorrelationID: "k", Data: data}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: topic, Key: []byte("k"), Value: b}
	}
	id, v := event(t, "k", 1)
	produce(t, cl, confirmed(true), record(topic, "k", id, v), confirmed(false), record(topic, "k", id, v))

	group := testkit.UniqueName(t, "g")
	r := start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k),
		Handler: insertEffect, Types: []contract.Type{contract.TypeOrderCreated}})
	eventually(t, 60*time.Second, "offsets committed to the end", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := k.Admin(t).FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		if o, _ := offs.Lookup(topic, 0); o.At != 4 {
			return errCount(int(o.At))
		}
		return nil
	})
	if s := r.Stats(); s.Applied != 1 || s.Duplicates != 1 || s.Ignored != 2 || s.DeadLettered != 0 {
		t.Fatalf("stats = %+v; want 1 applied, 1 duplicate, 2 ignored (the invalid one too), none dead-lettered", s)
	}
	if n := count(t, pool, `SELECT count(*) FROM processed_events WHERE consumer_group = $1`, group); n != 1 {
		t.Fatalf("%d dedupe rows; want 1, for the handled event only", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM effects`); n != 1 {
		t.Fatalf("%d effects; want 1", n)
	}

	// A batch of ignored records only: acknowledged without a transaction.
	produce(t, cl, confirmed(true), confirmed(true))
	eventually(t, 60*time.Second, "two more ignored", func() error {
		if s := r.Stats(); s.Ignored != 4 {
			return errStats(s)
		}
		return nil
	})

	// A type the catalog does not know is not "another consumer's event":
	// it is dead-lettered with its reason, and the partition goes on.
	b, err := schemas.Envelope{EventID: schemas.NewEventID(), EventType: "order.teleported", EventVersion: 1, Timestamp: time.Now(),
		AggregateType: "order", AggregateID: "k", CorrelationID: "k", Data: []byte(`{"order_id":"x"}`)}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	produce(t, cl, &kgo.Record{Topic: topic, Key: []byte("k"), Value: b}, confirmed(true))
	eventually(t, 60*time.Second, "the unknown type dead-lettered", countIs(t, pool, 1,
		`SELECT count(*) FROM dead_letters WHERE consumer_group = $1 AND reason = 'unknown_type' AND event_type = 'order.teleported'`, group))
	eventually(t, 60*time.Second, "the known one after it acknowledged", func() error {
		if s := r.Stats(); s.Ignored != 5 || s.DeadLettered != 1 {
			return errStats(s)
		}
		return nil
	})
}
