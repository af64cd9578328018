package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
)

func migrated(t *testing.T, pool *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	if err := outbox.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

// newPool opens a pool on a fresh database, large enough that the relay's
// workers overlap their batches (the path production runs).
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return pipelinedPool(t, testkit.NewDatabase(t, testkit.PostgresURL(t)))
}

func pipelinedPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	pool := testkit.Pool(t, fmt.Sprintf("%s%spool_max_conns=%d", url, sep, publisher.PipelineConns(publisher.DefaultWorkers)+1))
	return migrated(t, pool)
}

// startRelay runs an in-process relay until the test ends and returns it.
func startRelay(t *testing.T, cfg publisher.Config) *publisher.Relay {
	t.Helper()
	testDefaults(t, &cfg)
	if cfg.RebalanceInterval == 0 {
		cfg.RebalanceInterval = 200 * time.Millisecond
	}
	r, err := publisher.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, "relay", r.Run)
	return r
}

// testDefaults fills what the tests leave zero: logs go to the test's log,
// and keys held back are looked at often.
func testDefaults(t *testing.T, cfg *publisher.Config) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
}

// runUntilEnd runs run on its own goroutine; when the test ends it cancels
// run's context, waits for it to return and fails the test on its error.
func runUntilEnd(t *testing.T, what string, run func(context.Context) error) {
	t.Helper()
	testkit.Background(t, func(ctx context.Context) error {
		if err := run(ctx); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestRelayPublishesEveryRowWithItsHeadersInPerKeyOrder(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	topic := k.CreateTopic(t, "relay", 4)
	keys := relaytest.Keys(50)
	relaytest.Fill(t, pool, topic, keys, 20, 0)
	startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(), Shards: 8, BatchSize: 100})

	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, 20, 60*time.Second)
	relaytest.WaitAllPublished(t, pool, 10*time.Second)

	// One record through the services' path: headers say what the consumer needs.
	id := relaytest.Append(t, pool, topic, keys[0], 21, 0)
	var eventID string
	if err := pool.QueryRow(context.Background(), "select event_id::text from outbox where id = $1", id).Scan(&eventID); err != nil {
		t.Fatal(err)
	}
	cl := k.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the appended event never arrived")
		}
		var found *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == schemas.HeaderEventID && string(h.Value) == eventID {
					found = r
				}
			}
		})
		if found == nil {
			continue
		}
		hs := map[string]string{}
		for _, h := range found.Headers {
			hs[h.Key] = string(h.Value)
		}
		if string(found.Key) != keys[0] || hs[schemas.HeaderEventType] != "order.created" || hs[schemas.HeaderEventVersion] != "2" ||
			hs[schemas.HeaderContentType] != schemas.ContentTypeJSON {
			t.Fatalf("record key %s headers %v", found.Key, hs)
		}
		if err := schemas.MustDefault().Validate(found.Value); err != nil {
			t.Fatalf("record value does not validate: %v", err)
		}
		return
	}
}

func TestRelayDrainsOnCancelWithoutLeavingAckedRowsUnmarked(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	topic := k.CreateTopic(t, "drain", 2)
	// Many batches' worth, so rows are left when the relay stops.
	keys := relaytest.Keys(50)
	relaytest.Fill(t, pool, topic, keys, 100, 0)
	// The cancel comes from the first acknowledgement: its batch is then
	// certainly in flight (acked, not yet marked), which is what the drain
	// must finish.
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	r, err := publisher.New(publisher.Config{Pool: pool, Kafka: k.Config(), BatchSize: 200,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
		OnAck:  func(publisher.Ack) { once.Do(cancel) }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return: no acknowledgement to cancel on, or no return after the cancel")
	}
	// Once Run returned, Kafka and the outbox agree exactly: every row the
	// relay marked is in Kafka (never mark before the ack), and every record
	// in Kafka is marked (the batches in flight at the cancel were waited
	// for and marked, not abandoned to be sent again by the next relay).
	if n := relaytest.Count(t, pool, "select count(*) from outbox where published_at is null"); n == 0 {
		t.Fatal("the relay published everything before the cancel; the test proves nothing")
	}
	published := relaytest.Published(t, pool)
	check := relaytest.NewChecker(t, k, topic)
	check.ReadToEnd(30 * time.Second)
	seen := check.Seen()
	if len(seen) == 0 {
		t.Fatal("nothing reached Kafka before the cancel; the test proves nothing")
	}
	if n, some := relaytest.Missing(published, seen); n > 0 {
		t.Errorf("%d rows marked published are not in Kafka, e.g. %v", n, some)
	}
	if n, some := relaytest.Missing(seen, published); n > 0 {
		t.Errorf("%d records in Kafka are not marked published after the drain, e.g. %v", n, some)
	}
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if n := relaytest.Count(t, pool, `select count(*) from pg_locks where locktype = 'advisory'
		and database = (select oid from pg_database where datname = current_database())`); n != 0 {
		t.Fatalf("%d advisory locks still held after Run returned", n)
	}
}

// Another relay's batch in flight holds a row locked until it commits; the
// relay skips that row (SKIP LOCKED) but must not produce the later rows of
// its key past it. Here a test transaction holds seq 2 of a key: seq 1 goes,
// seq 3..5 stay pending while the other keys flow, and once the lock is
// released seq 2..5 go in order.
func TestRelayHoldsAKeyBehindARowLockedByAnotherBatch(t *testing.T) {
	k := testkit.NewKafka(t)
	url := testkit.NewDatabase(t, testkit.PostgresURL(t))
	pool := pipelinedPool(t, url)
	topic := k.CreateTopic(t, "locked", 2)
	ctx := context.Background()

	key, others := relaytest.Keys(1)[0], relaytest.Keys(5)
	relaytest.Append(t, pool, topic, key, 1, 0)
	held := relaytest.Append(t, pool, topic, key, 2, 0)
	relaytest.Append(t, pool, topic, key, 3, 0)
	relaytest.Append(t, pool, topic, key, 4, 0)
	relaytest.Fill(t, pool, topic, others, 10, 0)
	relaytest.Append(t, pool, topic, key, 5, 0) // after the other keys' rows in id order

	// The other relay: its own connection, its transaction open until released.
	holder, err := testkit.Pool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "select id from outbox where id = $1 for update", held); err != nil {
		t.Fatal(err)
	}

	// One shard and a batch larger than the outbox: the first batch locks
	// every row but the held one, so once the other keys' rows are marked,
	// the batch that had seq 3..5 of key has settled too.
	startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(), Shards: 1, BatchSize: 100})
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(others, 10, 60*time.Second)
	relaytest.WaitFor(t, 30*time.Second, "every row but those of the held key marked published", func() error {
		if n := relaytest.Count(t, pool, "select count(*) from outbox where published_at is null and partition_key <> $1", key); n != 0 {
			return fmt.Errorf("%d rows of other keys pending", n)
		}
		return nil
	})
	if n := relaytest.Count(t, pool, "select count(*) from outbox where partition_key = $1 and published_at is null", key); n != 4 {
		t.Fatalf("%d rows of the held key pending, want 4 (seq 2, held elsewhere, and seq 3..5 behind it)", n)
	}
	check.ReadToEnd(30 * time.Second)
	if got := check.Seq(key); got != 1 {
		t.Fatalf("held key reached seq %d in Kafka while its seq 2 is locked elsewhere; want 1", got)
	}
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatalf("per-key order broken while seq 2 was held: %v", errs)
	}

	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	check.WaitAll([]string{key}, 5, 30*time.Second)
	relaytest.WaitAllPublished(t, pool, 30*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestRelayParksARecordKafkaRefusesWhileOtherKeysFlowAndSkipReleasesItsKey(t *testing.T) {
	k := testkit.NewKafka(t)
	// A default pool (4 connections) is too small to overlap batches: this
	// test also covers the one-batch-at-a-time path in-process relays get.
	pool := migrated(t, testkit.NewPool(t))
	topic := testkit.UniqueName(t, "refuse")
	adm := k.Admin(t)
	if resp, err := adm.CreateTopic(context.Background(), 2, 1, relaytest.SmallMessages, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic) })

	p := relaytest.AppendPoisoned(4, 10, func(key string, seq, pad int) int64 {
		return relaytest.Append(t, pool, topic, key, seq, pad)
	})
	startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(), Shards: 4,
		MaxAttempts: 3, BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	p.ParkedThenSkipped(t, pool, relaytest.NewChecker(t, k, topic))
}

func TestRelayLosesNothingWhenTheBrokerStopsForTenSeconds(t *testing.T) {
	pk := testkit.NewPrivateKafka(t)
	k := pk.Kafka()
	pool := newPool(t)
	topic := k.CreateTopic(t, "outage", 3)
	keys := relaytest.Keys(30)
	relaytest.Fill(t, pool, topic, keys, 20, 0)
	startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(), Shards: 8,
		DeliveryTimeout: 3 * time.Second, BackoffMin: 50 * time.Millisecond, BackoffMax: time.Second, MaxAttempts: 2})
	relaytest.WaitFor(t, 30*time.Second, "first batch published", func() error {
		if relaytest.Count(t, pool, "select count(*) from outbox where published_at is not null") == 0 {
			return errors.New("nothing published yet")
		}
		return nil
	})

	pk.Stop(t)
	// Keep appending during a ~10 s outage: these rows must not be lost either.
	seq := 20
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		seq++
		for _, key := range keys[:5] {
			relaytest.Append(t, pool, topic, key, seq, 0)
		}
		<-time.After(500 * time.Millisecond) // the pace of appends, not a wait for the relay
	}
	pk.Start(t)

	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys[5:], 20, 90*time.Second)
	check.WaitAll(keys[:5], seq, 60*time.Second)
	relaytest.WaitAllPublished(t, pool, 30*time.Second)
	if n := relaytest.Count(t, pool, "select count(*) from outbox where parked_at is not null"); n != 0 {
		t.Fatalf("%d rows parked by a broker outage; transient failures must not park", n)
	}
}

func TestRelayReconnectsAfterPostgresRestarts(t *testing.T) {
	k := testkit.NewKafka(t)
	pg := testkit.NewPrivatePostgres(t)
	pool := pipelinedPool(t, pg.URL)
	topic := k.CreateTopic(t, "pgrestart", 3)
	keys := relaytest.Keys(20)
	relaytest.Fill(t, pool, topic, keys, 10, 0)
	r := startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(), Shards: 8})
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, 10, 60*time.Second)

	pg.Stop(t)
	pg.Start(t)
	// The shard locks must be held on the restarted server: OwnedShards
	// alone could still show the shards of the dead session if the relay
	// had not noticed the restart yet.
	relaytest.WaitFor(t, 30*time.Second, "relay holds its shard locks on the restarted server", func() error {
		var n int
		err := pool.QueryRow(context.Background(), `select count(*) from pg_locks
			where locktype = 'advisory' and granted and classid = $1::bigint::oid
			  and database = (select oid from pg_database where datname = current_database())`, int64(0x0c0d0002)).Scan(&n)
		if err != nil {
			return err // the pool drops its dead connections as it meets them
		}
		if n != 8 || len(r.OwnedShards()) != 8 {
			return fmt.Errorf("%d shard locks on the server, relay owns %d shards", n, len(r.OwnedShards()))
		}
		return nil
	})
	for _, key := range keys {
		relaytest.WaitFor(t, 20*time.Second, "append after the restart", func() error {
			_, err := relaytest.TryAppend(pool, topic, key, 11, 0) // the pool drops its dead connections as it meets them
			return err
		})
	}
	check.WaitAll(keys, 11, 60*time.Second)
	relaytest.WaitAllPublished(t, pool, 30*time.Second)
}

func TestRelayCleanupDeletesOldPublishedRowsInSmallBatches(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	topic := k.CreateTopic(t, "cleanup", 1)
	relaytest.Fill(t, pool, topic, relaytest.Keys(10), 10, 0) // ids 1..100
	ctx := context.Background()
	exec := func(q string) {
		t.Helper()
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// 45 rows published two days ago (past the retention), 25 an hour ago
	// (within it), 30 pending (the relay publishes them now: young too).
	exec(`update outbox set published_at = now() - interval '2 days' where id <= 45`)
	exec(`update outbox set published_at = now() - interval '1 hour' where id > 45 and id <= 70`)
	// Every DELETE statement on the outbox logs how many rows it removed, so
	// the test sees the batches, not only the end state.
	exec(`create table cleanup_statements (seq serial, deleted int not null)`)
	exec(`create function log_cleanup() returns trigger language plpgsql as $$
		begin insert into cleanup_statements (deleted) select count(*) from gone; return null; end $$`)
	exec(`create trigger log_cleanup after delete on outbox referencing old table as gone
		for each statement execute function log_cleanup()`)

	startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(), Shards: 4,
		Retention: 24 * time.Hour, CleanupInterval: 50 * time.Millisecond, CleanupBatch: 10})
	relaytest.WaitFor(t, 30*time.Second, "old published rows deleted and the rest published", func() error {
		old := relaytest.Count(t, pool, "select count(*) from outbox where published_at < now() - interval '1 day'")
		pending := relaytest.Count(t, pool, "select count(*) from outbox where published_at is null")
		if old != 0 || pending != 0 {
			return fmt.Errorf("%d old rows left, %d pending", old, pending)
		}
		return nil
	})
	if n := relaytest.Count(t, pool, "select count(*) from outbox"); n != 55 {
		t.Fatalf("%d rows left, want the 55 published within the retention", n)
	}
	if n := relaytest.Count(t, pool, "select count(*) from outbox where id > 45"); n != 55 {
		t.Fatalf("cleanup deleted rows within the retention: %d of ids 46..100 left", n)
	}
	var statements, biggest, deleted int
	if err := pool.QueryRow(ctx, `select count(*), coalesce(max(deleted), 0), coalesce(sum(deleted), 0)
		from cleanup_statements where deleted > 0`).Scan(&statements, &biggest, &deleted); err != nil {
		t.Fatal(err)
	}
	if deleted != 45 || biggest > 10 || statements < 5 {
		t.Fatalf("cleanup deleted %d rows in %d statements of at most %d rows; want 45 in statements of at most 10", deleted, statements, biggest)
	}
}

// A poll relay's acks say when it read each row; it never learns the
// commit time.
func TestRelayAcksCarryTheReadTime(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	topic := k.CreateTopic(t, "acktimes", 2)
	keys := relaytest.Keys(5)
	relaytest.Fill(t, pool, topic, keys, 2, 0)
	var mu sync.Mutex
	var acks []publisher.Ack
	startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(),
		OnAck: func(a publisher.Ack) { mu.Lock(); acks = append(acks, a); mu.Unlock() }})
	relaytest.WaitFor(t, 30*time.Second, "every record acknowledged", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acks) < 2*len(keys) {
			return fmt.Errorf("%d of %d", len(acks), 2*len(keys))
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, a := range acks {
		if !a.Committed.IsZero() || a.Read.Before(a.Inserted) || a.Acked.Before(a.Read) {
			t.Fatalf("event %s: inserted %v, committed %v, read %v, acked %v: want no commit time and inserted, read, acked in order",
				a.EventID, a.Inserted, a.Committed, a.Read, a.Acked)
		}
	}
}

// A backlog that arrives after the outbox's statistics were taken of a
// drained table (every row published) is planned as a few rows: a batch
// read of it ran for minutes, as many as autovacuum left the statistics
// stale (here for ever: it is off). The read times out, the relay
// refreshes the statistics and drains the backlog.
func TestRelayDrainsABacklogItsStatisticsDoNotKnowOf(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	topic := k.CreateTopic(t, "stalestats", 2)
	ctx := context.Background()
	keys := relaytest.Keys(1000)
	relaytest.Fill(t, pool, topic, keys, 20, 0)
	for _, q := range []string{
		"alter table outbox set (autovacuum_enabled = off)",
		"update outbox set published_at = now()",
		"analyze outbox",
		"truncate outbox",
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	const perKey = 50
	relaytest.Fill(t, pool, topic, keys, perKey, 900)
	startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config(), ReadTimeout: time.Second})
	// Planned as a few rows, each read of the first batches would take
	// about 20 s here, and the drain many minutes.
	relaytest.WaitAllPublished(t, pool, 90*time.Second)
}
