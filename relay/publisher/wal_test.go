package publisher_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/publisher"
)

// walPool opens a pool on a fresh, migrated database of the package's
// private server. Creating a replication slot waits for every transaction
// running on its server to end; on the shared server the packages testing
// in parallel hold theirs open for seconds, longer than a test waits.
func walPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return migrated(t, testkit.Pool(t, testkit.NewDatabase(t, testkit.PackagePostgresURL(t))))
}

// startWAL runs an in-process WAL relay on a fresh slot and publication
// until the test ends, and waits until it streams.
func startWAL(t *testing.T, pool *pgxpool.Pool, cfg publisher.WALConfig) *publisher.WALRelay {
	t.Helper()
	w := runWAL(t, pool, cfg)
	waitStreaming(t, w)
	return w
}

func waitStreaming(t *testing.T, w *publisher.WALRelay) {
	t.Helper()
	relaytest.WaitFor(t, 30*time.Second, "WAL relay streaming", func() error {
		if !w.Streaming() {
			return errors.New("not streaming yet")
		}
		return nil
	})
}

// runWAL is startWAL without waiting for the stream. The slot is dropped
// when the test ends: its database cannot be dropped while it exists.
func runWAL(t *testing.T, pool *pgxpool.Pool, cfg publisher.WALConfig) *publisher.WALRelay {
	t.Helper()
	cfg.Pool = pool
	if cfg.Slot == "" {
		cfg.Slot = testkit.UniqueName(t, "slot")
		cfg.Publication = testkit.UniqueName(t, "pub")
	}
	testDefaults(t, &cfg.Config)
	w, err := publisher.NewWAL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	relaytest.DropSlotAtEnd(t, pool, cfg.Slot)
	runUntilEnd(t, "WAL relay", w.Run)
	return w
}

func TestWALRelayPublishesAppendsInCommitOrderPerKeyAndDeletesThem(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := walPool(t)
	wr, topic := relaytest.WALTopic(t, k, 4, nil)
	w := startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: k.Config()}})

	// Concurrent appenders through outbox.Append, each key's events in
	// sequence from one goroutine: the relay sees them in commit order.
	keys := relaytest.Keys(40)
	const perKey = 25
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 1; seq <= perKey; seq++ {
				for i := g; i < len(keys); i += 4 {
					if _, err := relaytest.TryAppendWith(pool, wr, keys[i], seq, 0); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, perKey, 60*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	relaytest.WaitAllDeleted(t, pool, 30*time.Second)

	// Heartbeat: with nothing pending, the slot's confirmed LSN follows WAL
	// written elsewhere, so an idle relay does not pin it.
	ctx := context.Background()
	var target string
	if err := pool.QueryRow(ctx, "select pg_current_wal_lsn()::text").Scan(&target); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "create table wal_noise (n int); insert into wal_noise select generate_series(1, 1000)"); err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 30*time.Second, "idle slot confirmed past the WAL written after the drain", func() error {
		var past bool
		err := pool.QueryRow(ctx, `select confirmed_flush_lsn >= $2::pg_lsn from pg_replication_slots where slot_name = $1`,
			w.Slot(), target).Scan(&past)
		if err != nil || !past {
			return fmt.Errorf("confirmed flush not past %s (%v)", target, err)
		}
		return nil
	})
}

func TestWALRelayPublishesRowsPendingBeforeItsSlotExisted(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := walPool(t)
	topic := k.CreateTopic(t, "walbefore", 2)
	keys := relaytest.Keys(10)
	relaytest.Fill(t, pool, topic, keys, 10, 0)
	startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: k.Config()}})
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, 10, 60*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestWALRelayStreamsAgainAfterPostgresRestarts(t *testing.T) {
	k := testkit.NewKafka(t)
	pg := testkit.NewPrivatePostgres(t)
	pool := migrated(t, testkit.Pool(t, pg.URL))
	wr, topic := relaytest.WALTopic(t, k, 2, nil)
	w := startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: k.Config(),
		BackoffMin: 50 * time.Millisecond, BackoffMax: time.Second}})
	keys := relaytest.Keys(10)
	relaytest.AppendEach(t, pool, wr, keys, 1)
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, 1, 60*time.Second)

	pg.Stop(t)
	pg.Start(t)
	for _, key := range keys {
		relaytest.WaitFor(t, 20*time.Second, "append after the restart", func() error {
			_, err := relaytest.TryAppendWith(pool, wr, key, 2, 0) // the pool drops its dead connections as it meets them
			return err
		})
	}
	check.WaitAll(keys, 2, 60*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	relaytest.WaitFor(t, 30*time.Second, "every row deleted and the relay streaming", func() error {
		if n := relaytest.Count(t, pool, "select count(*) from outbox"); n != 0 {
			return fmt.Errorf("%d rows left", n)
		}
		if !w.Streaming() {
			return errors.New("not streaming")
		}
		return nil
	})
}

// parkingWAL is a relay that parks a row after three refusals, retrying
// fast.
func parkingWAL(k *testkit.Kafka) publisher.WALConfig {
	return publisher.WALConfig{Config: publisher.Config{Kafka: k.Config(),
		MaxAttempts: 3, BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond}}
}

func TestWALRelayParksARecordKafkaRefusesWhileOtherKeysFlowAndSkipReleasesItsKey(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := walPool(t)
	wr, topic := relaytest.WALTopic(t, k, 2, relaytest.SmallMessages)
	startWAL(t, pool, parkingWAL(k))
	p := relaytest.AppendPoisoned(4, 10, func(key string, seq, pad int) int64 {
		return relaytest.AppendWith(t, pool, wr, key, seq, pad)
	})
	check := relaytest.NewChecker(t, k, topic)
	p.ParkedThenSkipped(t, pool, check)
	// The key flows through the stream again.
	relaytest.AppendEach(t, pool, wr, []string{p.Key}, 5)
	check.WaitAll([]string{p.Key}, 5, 30*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestWALRelayParksARefusedRowPendingBeforeItsSlotExistedAndDeletesOnlyAcknowledgedRows(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := walPool(t)
	wr, topic := relaytest.WALTopic(t, k, 2, relaytest.SmallMessages)
	// Every row predates the slot: the relay publishes them from the table.
	p := relaytest.AppendPoisoned(3, 3, func(key string, seq, pad int) int64 {
		return relaytest.AppendWith(t, pool, wr, key, seq, pad)
	})
	startWAL(t, pool, parkingWAL(k))
	p.ParkedThenSkipped(t, pool, relaytest.NewChecker(t, k, topic))
}

// The walsender holds a new slot (pg_replication_slots.active) while
// CREATE_REPLICATION_SLOT waits for the transactions running on the server
// to end; rows committed meanwhile precede the slot's consistent point and
// are not in its stream. The relay is not streaming (nor ready) then, and
// publishes those rows from the table without counting them as received.
// A busy server stretches that wait to seconds: tests that took the slot's
// active flag for "streaming" appended their first rows in it.
func TestWALRelayIsNotStreamingWhileItsNewSlotWaitsForAConsistentPoint(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := walPool(t)
	wr, topic := relaytest.WALTopic(t, k, 2, nil)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "select pg_current_xact_id()"); err != nil { // a transaction with an xid
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	slot := testkit.UniqueName(t, "slot")
	w := runWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: k.Config(), Registerer: reg},
		Slot: slot, Publication: testkit.UniqueName(t, "pub")})
	relaytest.WaitFor(t, 30*time.Second, "the relay's walsender holding its new slot", func() error {
		if relaytest.Count(t, pool, "select count(*) from pg_replication_slots where slot_name = $1 and active", slot) != 1 {
			return fmt.Errorf("slot %s not active", slot)
		}
		return nil
	})
	keys := relaytest.Keys(5)
	relaytest.AppendEach(t, pool, wr, keys, 1)
	for end := time.Now().Add(time.Second); time.Now().Before(end); <-time.After(50 * time.Millisecond) {
		if w.Streaming() {
			t.Fatal("the relay streams while its slot waits for a consistent point")
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitStreaming(t, w)
	check := relaytest.NewChecker(t, k, topic)
	check.WaitAll(keys, 1, 60*time.Second)
	if n := testkit.Gather(t, reg).Value("concord_relay_wal_received_rows_total", nil); n != 0 {
		t.Fatalf("%v rows committed before the slot's consistent point decoded from its stream; want 0 (they are published from the table)", n)
	}

	relaytest.AppendEach(t, pool, wr, keys, 2)
	check.WaitAll(keys, 2, 30*time.Second)
	relaytest.WaitFor(t, 10*time.Second, "the rows appended while streaming decoded from the stream", func() error {
		if n := testkit.Gather(t, reg).Value("concord_relay_wal_received_rows_total", nil); n != 5 {
			return fmt.Errorf("%v of 5 rows decoded", n)
		}
		return nil
	})
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// Every acknowledged record tells where its commit-to-ack went: the stream
// gives its transaction's commit time, the relay the moment it read the
// transaction, and concord_relay_wal_commit_to_read_seconds has one sample
// per transaction read.
func TestWALRelayAcksCarryTheCommitTimeAndTheReadTime(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := walPool(t)
	wr, _ := relaytest.WALTopic(t, k, 2, nil)
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var acks []publisher.Ack
	startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: k.Config(), Registerer: reg,
		OnAck: func(a publisher.Ack) { mu.Lock(); acks = append(acks, a); mu.Unlock() }}})
	const txns = 20
	key := relaytest.Keys(1)[0]
	for i := range txns {
		relaytest.AppendWith(t, pool, wr, key, i+1, 0)
	}
	relaytest.WaitFor(t, 30*time.Second, "every record acknowledged", func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(acks) < txns {
			return fmt.Errorf("%d of %d", len(acks), txns)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for _, a := range acks {
		if a.Committed.IsZero() || a.Read.IsZero() {
			t.Fatalf("event %s: commit time %v, read at %v: want both", a.EventID, a.Committed, a.Read)
		}
		// The server's clock and the relay's are one clock here.
		if a.Committed.Before(a.Inserted) || a.Read.Before(a.Committed) || a.Acked.Before(a.Read) {
			t.Fatalf("event %s: inserted %v, committed %v, read %v, acked %v: want them in that order",
				a.EventID, a.Inserted, a.Committed, a.Read, a.Acked)
		}
	}
	if n := testkit.Gather(t, reg).Value("concord_relay_wal_commit_to_read_seconds", nil); n < txns {
		t.Fatalf("concord_relay_wal_commit_to_read_seconds has %v samples, want one per transaction (%d)", n, txns)
	}
}
