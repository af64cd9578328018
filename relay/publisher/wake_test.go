package publisher_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
)

// A worker reads the outbox again at once only when rows may be due: after
// a full batch it goes on without waiting for a NOTIFY (a backlog of ten
// batches drains with the poll an hour away), and after a batch that took
// every due row it waits for the next NOTIFY instead of reading the outbox
// to find it empty.
func TestRelayReadsAgainAtOnceOnlyAfterAFullBatch(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	topic := k.CreateTopic(t, "relay", 4)
	keys := relaytest.Keys(19)
	// 95 rows before the relay starts, committed in one transaction (one
	// NOTIFY): nine full batches of ten and one of five.
	relaytest.FillSeqs(t, pool, topic, keys, 1, 5, 0, 1000)
	reg := prometheus.NewRegistry()
	startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(), Workers: 1, BatchSize: 10, PollInterval: time.Hour, Registerer: reg})
	relaytest.WaitAllPublished(t, pool, 30*time.Second)

	empty := testkit.Gather(t, reg).Value("concord_relay_outbox_reads_total", map[string]string{"result": "empty"})
	for seq := 6; seq <= 8; seq++ {
		relaytest.Append(t, pool, topic, keys[0], seq, 0) // one row, one NOTIFY
		relaytest.WaitAllPublished(t, pool, 30*time.Second)
	}
	if got := testkit.Gather(t, reg).Value("concord_relay_outbox_reads_total", map[string]string{"result": "empty"}) - empty; got != 0 {
		t.Fatalf("%v empty reads of the outbox while three rows were published one by one; want none", got)
	}
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys[1:], 5, 30*time.Second)
	check.WaitAll(keys[:1], 8, 30*time.Second)
}

// A commit wakes only the worker that reads its key's shard: with two
// workers, rows of one shard appended one at a time are read by that
// shard's worker, and the other worker never reads the outbox to find
// nothing in its shard.
func TestACommitWakesOnlyTheWorkerOfItsShard(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	topic := k.CreateTopic(t, "relay", 4)
	var keys []string // keys of shard 0 of 2, which worker 0 reads
	for _, key := range relaytest.Keys(200) {
		if outbox.KeyHash(key)%2 == 0 && len(keys) < 20 {
			keys = append(keys, key)
		}
	}
	reg := prometheus.NewRegistry()
	startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(), Workers: 2, Shards: 2, PollInterval: time.Hour, Registerer: reg})
	// Started: both shards owned and the LISTEN session up. Each wakes
	// every worker once, which the tolerance below allows for.
	relaytest.WaitFor(t, 30*time.Second, "the relay owns both shards and listens", func() error {
		if n := testkit.Gather(t, reg).Value("concord_relay_owned_shards", nil); n != 2 {
			return fmt.Errorf("%v shards owned", n)
		}
		if n := relaytest.Count(t, pool, `select count(*) from pg_stat_activity
			where datname = current_database() and application_name = 'concord-relay-listener' and query ilike 'listen%'`); n != 1 {
			return fmt.Errorf("%d listening sessions", n)
		}
		return nil
	})
	relaytest.Append(t, pool, topic, keys[0], 1, 0)
	relaytest.WaitAllPublished(t, pool, 30*time.Second)

	empty := testkit.Gather(t, reg).Value("concord_relay_outbox_reads_total", map[string]string{"result": "empty"})
	for _, key := range keys[1:] {
		relaytest.Append(t, pool, topic, key, 1, 0) // one row, one NOTIFY naming its key hash
		relaytest.WaitAllPublished(t, pool, 30*time.Second)
	}
	if got := testkit.Gather(t, reg).Value("concord_relay_outbox_reads_total", map[string]string{"result": "empty"}) - empty; got > 4 {
		t.Fatalf("%v empty reads of the outbox while %d rows of one shard were published one by one; want at most 4 (the start's wake-ups), not one per row by the other shard's worker",
			got, len(keys)-1)
	}
	relaytest.NewChecker(t, k, topic).WaitAll(keys, 1, 30*time.Second)
}
