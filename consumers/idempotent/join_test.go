package idempotent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
)

// joinedRun is a runner with one slot and JoinPartitions over a topic of
// four partitions, and what its handler saw. startJoined starts it: the
// first batch (one event on partition 0) holds the slot until a batch of
// every other partition waits for it; fail decides, per handler call,
// whether the call fails.
type joinedRun struct {
	topic, group string
	pool         *pgxpool.Pool
	ids          map[int32][]string // event ids per partition, in offset order
	mu           sync.Mutex
	calls        [][]idempotent.Event
	r            *running
}

func startJoined(t *testing.T, k *testkit.Kafka, fail func(j *joinedRun, evs []idempotent.Event) error) *joinedRun {
	j := &joinedRun{topic: k.CreateTopic(t, "orders", 4), ids: map[int32][]string{}, pool: testkit.NewPool(t)}
	migrate(t, j.pool)
	j.group = testkit.UniqueName(t, "g")
	cl := k.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	send := func(p int32, n int) {
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			id, v := event(t, fmt.Sprintf("k%d", p), len(j.ids[p]))
			j.ids[p] = append(j.ids[p], id)
			rec := record(j.topic, fmt.Sprintf("k%d", p), id, v)
			rec.Partition = p
			recs = append(recs, rec)
		}
		produce(t, cl, recs...)
	}
	entered, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	handler := func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, _ outbox.Emitter) error {
		once.Do(func() { close(entered); <-gate })
		j.mu.Lock()
		j.calls = append(j.calls, evs)
		j.mu.Unlock()
		if err := fail(j, evs); err != nil {
			return err
		}
		return insertEffects(ctx, tx, evs)
	}
	send(0, 1)
	j.r = start(t, idempotent.Config{Group: j.group, Topics: []string{j.topic}, Pool: j.pool, Kafka: kafkaConfig(k),
		BatchHandler: handler, MaxConcurrentPartitions: 1, JoinPartitions: true})
	open := sync.OnceFunc(func() { close(gate) })
	t.Cleanup(open) // before the runner's stop, which waits for the held call
	// The others are sent once the first batch holds the slot, so that it
	// is that one event alone.
	select {
	case <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the first batch did not reach the handler within 60s")
	}
	for p := int32(0); p < 4; p++ {
		send(p, 3)
	}
	eventually(t, 60*time.Second, "a batch of partitions 1-3 waiting for the slot", func() error {
		if n := idempotent.Waiting(j.r.Runner); n < 3 {
			return fmt.Errorf("%d batches waiting", n)
		}
		return nil
	})
	open()
	return j
}

// partitionsOf is the partitions a handler call's events came from.
func partitionsOf(evs []idempotent.Event) map[int32]bool {
	ps := map[int32]bool{}
	for _, ev := range evs {
		ps[ev.Partition] = true
	}
	return ps
}

// committedToTheEnd waits until every partition's offset is committed past
// its last event.
func (j *joinedRun) committedToTheEnd(t *testing.T, k *testkit.Kafka) {
	t.Helper()
	eventually(t, 30*time.Second, "offsets committed to the end of every partition", func() error {
		for p, ids := range j.ids {
			if o := committedOffset(t, k, j.group, j.topic, p); o != int64(len(ids)) {
				return fmt.Errorf("partition %d committed at %d, want %d", p, o, len(ids))
			}
		}
		return nil
	})
}

// TestWaitingPartitionsJoinOneTransaction protects JoinPartitions: with
// one slot, the batches of the partitions that waited for it are applied
// together, each event once, each partition in offset order, with its
// dedupe row at its own position, and every partition's offset moves.
func TestWaitingPartitionsJoinOneTransaction(t *testing.T) {
	k := testkit.NewKafka(t)
	j := startJoined(t, k, func(*joinedRun, []idempotent.Event) error { return nil })
	j.committedToTheEnd(t, k)
	j.r.stop(t)

	j.mu.Lock()
	defer j.mu.Unlock()
	joined := 0
	for _, evs := range j.calls {
		if len(partitionsOf(evs)) > 1 {
			joined++
		}
	}
	if joined == 0 {
		t.Fatalf("no handler call saw more than one partition in %d calls: the waiting batches were not joined", len(j.calls))
	}
	seen := map[string]int{}
	next := map[int32]int{}
	for _, evs := range j.calls {
		for _, ev := range evs {
			seen[ev.EventID]++
			if want := j.ids[ev.Partition][next[ev.Partition]]; ev.EventID != want {
				t.Fatalf("partition %d: event %s applied at position %d, want %s: out of offset order", ev.Partition, ev.EventID, next[ev.Partition], want)
			}
			next[ev.Partition]++
		}
	}
	for p, ids := range j.ids {
		for _, id := range ids {
			if seen[id] != 1 {
				t.Fatalf("partition %d: event %s applied %d times", p, id, seen[id])
			}
		}
	}
	if n := count(t, j.pool, `SELECT count(*) FROM processed_events p JOIN effects e ON e.event_id = p.event_id::text
		AND e.topic = p.topic AND e.partition = p.partition AND e."offset" = p."offset"`); n != 13 {
		t.Fatalf("%d of 13 dedupe rows record their event's own topic, partition and offset", n)
	}
	if s := j.r.Stats(); s.Applied != 13 || s.Retries != 0 {
		t.Fatalf("stats = %+v, want 13 applied, no retries", s)
	}
}

// TestJoinedTransactionThatFailsIsRetriedByEveryPartition: a transient
// failure of a joined transaction leaves every partition in it to retry;
// nothing is lost and nothing applied twice.
func TestJoinedTransactionThatFailsIsRetriedByEveryPartition(t *testing.T) {
	k := testkit.NewKafka(t)
	failed := false // the handler runs in one slot: calls do not overlap
	j := startJoined(t, k, func(_ *joinedRun, evs []idempotent.Event) error {
		if !failed && len(partitionsOf(evs)) > 1 {
			failed = true
			return errString("connection reset")
		}
		return nil
	})
	j.committedToTheEnd(t, k)
	j.r.stop(t)
	if !failed {
		t.Fatal("no joined transaction ran")
	}
	if n := count(t, j.pool, `SELECT count(DISTINCT event_id) FROM effects`); n != 13 {
		t.Fatalf("%d distinct events applied, want 13", n)
	}
	if n := count(t, j.pool, `SELECT count(*) FROM effects`); n != 13 {
		t.Fatalf("%d effects for 13 events", n)
	}
	if s := j.r.Stats(); s.Applied != 13 || s.Retries < 2 {
		t.Fatalf("stats = %+v, want 13 applied and a retry by each partition of the failed transaction", s)
	}
}

// TestPermanentFailureInAJoinedTransactionDeadLettersOnlyThatEvent: the
// careful path finds the failing event among several partitions' events;
// the other partitions' events are applied and their offsets move.
func TestPermanentFailureInAJoinedTransactionDeadLettersOnlyThatEvent(t *testing.T) {
	k := testkit.NewKafka(t)
	j := startJoined(t, k, func(j *joinedRun, evs []idempotent.Event) error {
		for _, ev := range evs {
			if ev.EventID == j.ids[2][1] { // the ids are all written before the first call returns
				return idempotent.Permanent(errString("order rejected by rule 7"))
			}
		}
		return nil
	})
	bad := j.ids[2][1]
	j.committedToTheEnd(t, k)
	j.r.stop(t)
	j.mu.Lock()
	joined := false
	for _, evs := range j.calls {
		for _, ev := range evs {
			joined = joined || ev.EventID == bad && len(partitionsOf(evs)) > 1
		}
	}
	j.mu.Unlock()
	if !joined {
		t.Fatal("the failing event never came in a joined transaction")
	}
	if n := count(t, j.pool, `SELECT count(*) FROM dead_letters WHERE event_id = $1 AND reason = 'handler'`, bad); n != 1 {
		t.Fatalf("%d dead letters for the failing event, want 1", n)
	}
	if n := count(t, j.pool, `SELECT count(*) FROM effects WHERE event_id = $1`, bad); n != 0 {
		t.Fatalf("the failing event left %d effects", n)
	}
	if n := count(t, j.pool, `SELECT count(DISTINCT event_id) FROM effects`); n != 12 {
		t.Fatalf("%d distinct events applied, want the other 12", n)
	}
	if n := count(t, j.pool, `SELECT count(*) FROM effects`); n != 12 {
		t.Fatalf("%d effects for 12 events", n)
	}
	if s := j.r.Stats(); s.Applied != 12 || s.DeadLettered != 1 {
		t.Fatalf("stats = %+v, want 12 applied, 1 dead-lettered", s)
	}
}
