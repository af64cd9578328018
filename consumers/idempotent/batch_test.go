package idempotent_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
)

// TestBatchHandlerPermanentFailureDeadLettersOnlyThatEvent protects the
// BatchHandler contract: the handler sees a batch's new events in one call,
// and when that call fails permanently the runner finds the failing event
// by redoing the batch one event at a time, so the others are applied once
// and only the bad one is dead-lettered, with no effect and no dedupe row.
func TestBatchHandlerPermanentFailureDeadLettersOnlyThatEvent(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrate(t, pool)
	topic := k.CreateTopic(t, "orders", 1)
	var recs []*kgo.Record
	bad := ""
	for i := 0; i < 5; i++ {
		id, v := event(t, "k", i)
		if i == 2 {
			bad = id
		}
		recs = append(recs, record(topic, "k", id, v))
	}
	recs = append(recs, recs[1]) // a duplicate in the same batch: one effect
	produce(t, k.Client(t), recs...)

	var calls, largest int // only the runner's goroutine of the single partition touches them before stop
	handler := func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, _ outbox.Emitter) error {
		calls++
		largest = max(largest, len(evs))
		if err := insertEffects(ctx, tx, evs); err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.EventID == bad { // wrote its effects, then fails
				return idempotent.Permanent(errString("order rejected by rule 7"))
			}
		}
		return nil
	}
	r := start(t, idempotent.Config{Group: testkit.UniqueName(t, "g"), Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k), BatchHandler: handler})
	eventually(t, 60*time.Second, "dead letter", countIs(t, pool, 1, `SELECT count(*) FROM dead_letters WHERE event_id = $1 AND reason = 'handler'`, bad))
	eventually(t, 30*time.Second, "other effects", countIs(t, pool, 4, `SELECT count(*) FROM effects`))
	r.stop(t)
	if n := count(t, pool, `SELECT count(DISTINCT event_id) FROM effects`); n != 4 {
		t.Fatalf("%d distinct events among the effects, want 4", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM effects WHERE event_id = $1`, bad); n != 0 {
		t.Fatalf("the failed event left %d effects", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM processed_events WHERE event_id = $1`, bad); n != 0 {
		t.Fatal("the failed event is recorded as processed: a replay after the fix would skip it")
	}
	if s := r.Stats(); s.Applied != 4 || s.DeadLettered != 1 || s.Duplicates != 1 {
		t.Fatalf("stats = %+v, want 4 applied, 1 dead-lettered, 1 duplicate", s)
	}
	if largest < 2 {
		t.Fatalf("the handler never saw more than %d events in %d calls: not called per batch", largest, calls)
	}
}

func TestConfigTakesHandlerOrBatchHandler(t *testing.T) {
	pool := testkit.NewPool(t)
	one := func(context.Context, pgx.Tx, idempotent.Event, outbox.Emitter) error { return nil }
	many := func(context.Context, pgx.Tx, []idempotent.Event, outbox.Emitter) error { return nil }
	for _, tc := range []struct {
		name    string
		h       idempotent.Handler
		bh      idempotent.BatchHandler
		wantErr bool
	}{
		{"handler", one, nil, false},
		{"batch handler", nil, many, false},
		{"neither", nil, nil, true},
		{"both", one, many, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idempotent.NewRunner(idempotent.Config{Group: "g", Topics: []string{"t"}, Pool: pool,
				Kafka: kafkaConfig(&testkit.Kafka{Brokers: []string{"unused:9092"}}), Handler: tc.h, BatchHandler: tc.bh})
			if (err != nil) != tc.wantErr {
				t.Fatalf("NewRunner: err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
