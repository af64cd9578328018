package idempotent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
)

func committedOffset(t testing.TB, k *testkit.Kafka, group, topic string, p int32) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := k.Admin(t).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, p)
	if !ok {
		return -1
	}
	return o.At
}

func batch(t testing.TB, topic, key string, from, n int) []*kgo.Record {
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		id, v := event(t, key, i)
		recs = append(recs, record(topic, key, id, v))
	}
	return recs
}

func TestDatabaseDownKeepsOffsetsAndAppliesEverythingOnceAfterwards(t *testing.T) {
	pg := testkit.NewPrivatePostgres(t)
	pool := testkit.Pool(t, testkit.NewDatabase(t, pg.URL))
	migrate(t, pool)
	k := testkit.NewKafka(t)
	topic := k.CreateTopic(t, "orders", 1)
	group := testkit.UniqueName(t, "g")
	cl := k.Client(t)

	r := start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k), Handler: insertEffect,
		CommitInterval: 100 * time.Millisecond})
	produce(t, cl, batch(t, topic, "k", 0, 20)...)
	eventually(t, 60*time.Second, "first batch applied", countIs(t, pool, 20, `SELECT count(*) FROM effects`))
	eventually(t, 30*time.Second, "first batch committed", func() error {
		if o := committedOffset(t, k, group, topic, 0); o != 20 {
			return fmt.Errorf("committed %d", o)
		}
		return nil
	})

	pg.Stop(t)
	produce(t, cl, batch(t, topic, "k", 20, 30)...)
	eventually(t, 60*time.Second, "retries while the database is down", func() error {
		if s := r.Stats(); s.Retries < 3 {
			return errStats(s)
		}
		return nil
	})
	if o := committedOffset(t, k, group, topic, 0); o != 20 {
		t.Fatalf("offset moved to %d while the database was down", o)
	}

	pg.Start(t)
	eventually(t, 90*time.Second, "everything applied", countIs(t, pool, 50, `SELECT count(*) FROM effects`))
	eventually(t, 30*time.Second, "offsets committed", func() error {
		if o := committedOffset(t, k, group, topic, 0); o != 50 {
			return fmt.Errorf("committed %d", o)
		}
		return nil
	})
	if n := count(t, pool, `SELECT count(DISTINCT event_id) FROM effects`); n != 50 {
		t.Fatalf("%d distinct events applied, want 50", n)
	}
}

// TestMembersJoiningAndLeavingKeepExactlyOnceAndPerKeyOrder streams 20k
// events over 12 partitions while consumers join and leave the group.
func TestMembersJoiningAndLeavingKeepExactlyOnceAndPerKeyOrder(t *testing.T) {
	const total, keys = 20000, 240
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrate(t, pool)
	topic := k.CreateTopic(t, "orders", 12)
	group := testkit.UniqueName(t, "g")
	cl := k.Client(t, kgo.ProducerLinger(5*time.Millisecond))
	cfg := idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k), Handler: insertEffect,
		MaxBatchRecords: 200, // smaller batches: more commits to interrupt
		KafkaOpts:       []kgo.Opt{kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond)}}

	// The producer is owned by the test: it streams in chunks while the
	// group changes, and the test waits for it. Every fourth chunk is
	// published a second time after the next one, as a relay that lost its
	// acknowledgements does: the copies reach whichever member owns the
	// partition by then, which may not be the one that applied the
	// originals, and only dedupe keeps them to one effect. (Clean
	// hand-overs alone redeliver nothing: revocation commits first, so
	// without the copies this test could not see dedupe fail.)
	const dupEvery = 4
	var wg sync.WaitGroup
	wg.Add(1)
	republished := 0
	go func() {
		defer wg.Done()
		var again []*kgo.Record
		for chunk, sent := 0, 0; sent < total; chunk++ {
			var recs []*kgo.Record
			for i := 0; i < 1000; i++ {
				n := sent + i
				key := fmt.Sprintf("key-%03d", n%keys)
				id, v := event(t, key, n/keys)
				recs = append(recs, record(topic, key, id, v))
			}
			sent += len(recs)
			send := append(recs, again...)
			again = nil
			if chunk%dupEvery == 0 {
				for _, r := range recs {
					again = append(again, &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers})
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := cl.ProduceSync(ctx, send...).FirstErr()
			cancel()
			if err != nil {
				t.Error(err)
				return
			}
			republished += len(send) - len(recs)
		}
	}()

	applied := func() int { return count(t, pool, `SELECT count(*) FROM effects`) }
	atLeast := func(n int) func() error {
		return func() error {
			if a := applied(); a < n {
				return fmt.Errorf("applied %d", a)
			}
			return nil
		}
	}
	a := start(t, cfg)
	eventually(t, 60*time.Second, "A applies", atLeast(2000))
	b := start(t, cfg) // B joins: partitions move from A
	eventually(t, 60*time.Second, "A and B apply", atLeast(6000))
	a.stop(t) // A leaves: its partitions move to B
	eventually(t, 60*time.Second, "B applies", atLeast(10000))
	c := start(t, cfg) // C joins
	eventually(t, 60*time.Second, "B and C apply", atLeast(14000))
	b.stop(t) // B leaves
	wg.Wait()
	eventually(t, 120*time.Second, "every event applied", countIs(t, pool, total, `SELECT count(DISTINCT event_id) FROM effects`))
	eventually(t, 60*time.Second, "every copy consumed", func() error {
		if d := a.Stats().Duplicates + b.Stats().Duplicates + c.Stats().Duplicates; d < int64(republished) {
			return fmt.Errorf("%d duplicates counted, %d copies published", d, republished)
		}
		return nil
	})
	c.stop(t)

	if n := count(t, pool, `SELECT count(*) FROM effects`); n != total {
		t.Fatalf("%d effects of %d events", n, total)
	}
	// Per-key order: effects of a key were inserted in seq order.
	if n := count(t, pool, `SELECT count(*) FROM (
		SELECT seq < lag(seq) OVER (PARTITION BY key ORDER BY id) AS backwards FROM effects) x WHERE backwards`); n != 0 {
		t.Fatalf("%d effects applied out of per-key order", n)
	}
}
