package idempotent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
)

func TestPoisonRecordsAreDeadLetteredAndThePartitionContinues(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrate(t, pool)
	topic := k.CreateTopic(t, "orders", 1)
	group := testkit.UniqueName(t, "g")
	cl := k.Client(t)

	id1, good1 := event(t, "k", 1)
	id2, good2 := event(t, "k", 2)
	id3, good3 := event(t, "k", 3)
	_, schemaBad := event(t, "k", 0)
	schemaBad = []byte(strings.Replace(string(schemaBad), `"currency":"EUR"`, `"currency":"euro"`, 1))
	_, unknownVersion := event(t, "k", 0)
	unknownVersion = []byte(strings.Replace(string(unknownVersion), `"event_version":2`, `"event_version":9`, 1))
	produce(t, cl,
		record(topic, "k", id1, good1),
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(`{"event_id": oops`)},
		record(topic, "k", id2, good2),
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: schemaBad},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: unknownVersion},
		record(topic, "k", id3, good3),
	)

	r := start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k), Handler: insertEffect})
	eventually(t, 60*time.Second, "good events applied", countIs(t, pool, 3, `SELECT count(*) FROM effects`))
	eventually(t, 30*time.Second, "poison dead-lettered", countIs(t, pool, 3, `SELECT count(*) FROM dead_letters`))

	rows, err := pool.Query(context.Background(), `SELECT "offset", reason, error FROM dead_letters ORDER BY "offset"`)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		offset int64
		reason string
		in     string
	}{
		{1, idempotent.ReasonDecode, "decode envelope"},
		{3, idempotent.ReasonSchema, "/data/currency"},
		{4, idempotent.ReasonUnknownVersion, "v9"},
	}
	i := 0
	for rows.Next() {
		var off int64
		var reason, msg string
		if err := rows.Scan(&off, &reason, &msg); err != nil {
			t.Fatal(err)
		}
		if off != want[i].offset || reason != want[i].reason || !strings.Contains(msg, want[i].in) {
			t.Errorf("dead letter %d = (%d, %s, %q), want (%d, %s, …%s…)", i, off, reason, msg, want[i].offset, want[i].reason, want[i].in)
		}
		i++
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}

	// The DLQ holds the original bytes plus where they came from and why.
	dlq := k.Client(t, kgo.ConsumeTopics(group+idempotent.DLQSuffix), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	eventually(t, 30*time.Second, "DLQ records", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		got = append(got, dlq.PollFetches(ctx).Records()...)
		if len(got) < 3 {
			return errCount(len(got))
		}
		return nil
	})
	h := headers(got[0])
	if string(got[0].Value) != `{"event_id": oops` || string(got[0].Key) != "k" ||
		h[idempotent.HeaderDLQTopic] != topic || h[idempotent.HeaderDLQPartition] != "0" || h[idempotent.HeaderDLQOffset] != "1" ||
		h[idempotent.HeaderDLQReason] != idempotent.ReasonDecode || h[idempotent.HeaderDLQError] == "" || h[idempotent.HeaderDLQTime] == "" {
		t.Fatalf("DLQ record = key %q value %q headers %v", got[0].Key, got[0].Value, h)
	}

	// The partition went on: its offset is committed past the poison.
	eventually(t, 30*time.Second, "offsets committed to the end", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		offs, err := k.Admin(t).FetchOffsets(ctx, group)
		if err != nil {
			return err
		}
		if o, _ := offs.Lookup(topic, 0); o.At != 6 {
			return errCount(int(o.At))
		}
		return nil
	})
	if s := r.Stats(); s.Applied != 3 || s.DeadLettered != 3 {
		t.Fatalf("stats = %+v", s)
	}
}

// TestHandlerPermanentFailureRollsBackOnlyThatEvent checks the savepoint:
// the failing event's partial effect is undone, the others in the same
// batch are kept.
func TestHandlerPermanentFailureRollsBackOnlyThatEvent(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrate(t, pool)
	topic := k.CreateTopic(t, "orders", 1)
	cl := k.Client(t)
	var recs []*kgo.Record
	bad := ""
	for i := 0; i < 5; i++ {
		id, v := event(t, "k", i)
		if i == 2 {
			bad = id
		}
		recs = append(recs, record(topic, "k", id, v))
	}
	produce(t, cl, recs...)
	handler := func(ctx context.Context, tx pgxTx, ev idempotent.Event, out outbox.Emitter) error {
		if err := insertEffect(ctx, tx, ev, out); err != nil {
			return err
		}
		if ev.EventID == bad { // wrote its effect, then fails
			return idempotent.Permanent(errString("order rejected by rule 7"))
		}
		return nil
	}
	start(t, idempotent.Config{Group: testkit.UniqueName(t, "g"), Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k), Handler: handler})
	eventually(t, 60*time.Second, "dead letter", countIs(t, pool, 1, `SELECT count(*) FROM dead_letters WHERE event_id = $1 AND reason = 'handler'`, bad))
	eventually(t, 30*time.Second, "other effects", countIs(t, pool, 4, `SELECT count(*) FROM effects`))
	if n := count(t, pool, `SELECT count(*) FROM effects WHERE event_id = $1`, bad); n != 0 {
		t.Fatalf("the failed event left %d effects", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM processed_events WHERE event_id = $1`, bad); n != 0 {
		t.Fatal("the failed event is recorded as processed: a replay after the fix would skip it")
	}
}
