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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
)

// startWAL runs an in-process WAL relay on a fresh slot and publication
// until the test ends, and waits until it streams; the slot is dropped
// afterwards so the shared server does not keep WAL for it.
func startWAL(t *testing.T, pool *pgxpool.Pool, cfg publisher.WALConfig) *publisher.WALRelay {
	t.Helper()
	w := runWAL(t, pool, cfg)
	relaytest.WaitFor(t, 30*time.Second, "WAL relay streaming", func() error {
		if !w.Streaming() {
			return errors.New("not streaming yet")
		}
		return nil
	})
	return w
}

// runWAL is startWAL without waiting for the stream.
func runWAL(t *testing.T, pool *pgxpool.Pool, cfg publisher.WALConfig) *publisher.WALRelay {
	t.Helper()
	cfg.Pool = pool
	if cfg.Slot == "" {
		cfg.Slot = testkit.UniqueName(t, "slot")
		cfg.Publication = testkit.UniqueName(t, "pub")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	w, err := publisher.NewWAL(cfg)
	if err != nil {
		t.Fatal(err)
	}
	relaytest.DropSlotAtEnd(t, pool, cfg.Slot)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WAL relay run: %v", err)
		}
	})
	return w
}

func TestWALRelayPublishesAppendsInCommitOrderPerKeyAndMarksThem(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	wr, topic := relaytest.WALTopic(t, k, 4, nil)
	w := startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: kit.KafkaConfig{Brokers: k.Brokers}}})

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
	check := relaytest.NewChecker(t, k.Brokers, topic)
	check.WaitAll(keys, perKey, 60*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	relaytest.WaitFor(t, 30*time.Second, "every row marked published", func() error {
		if n := relaytest.Count(t, pool, "select count(*) from outbox where published_at is null"); n != 0 {
			return fmt.Errorf("%d rows pending", n)
		}
		return nil
	})

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
	pool := newPool(t)
	topic := k.CreateTopic(t, "walbefore", 2)
	keys := relaytest.Keys(10)
	relaytest.Fill(t, pool, topic, keys, 10, 0)
	startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: kit.KafkaConfig{Brokers: k.Brokers}}})
	check := relaytest.NewChecker(t, k.Brokers, topic)
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
	w := startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: kit.KafkaConfig{Brokers: k.Brokers},
		BackoffMin: 50 * time.Millisecond, BackoffMax: time.Second}})
	keys := relaytest.Keys(10)
	for _, key := range keys {
		if _, err := relaytest.TryAppendWith(pool, wr, key, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	check := relaytest.NewChecker(t, k.Brokers, topic)
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
	relaytest.WaitFor(t, 30*time.Second, "every row marked published and the relay streaming", func() error {
		if n := relaytest.Count(t, pool, "select count(*) from outbox where published_at is null"); n != 0 {
			return fmt.Errorf("%d rows pending", n)
		}
		if !w.Streaming() {
			return errors.New("not streaming")
		}
		return nil
	})
}

func TestWALRelayParksARecordKafkaRefusesWhileOtherKeysFlowAndSkipReleasesItsKey(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	limit := "4096"
	wr, topic := relaytest.WALTopic(t, k, 2, map[string]*string{"max.message.bytes": &limit})
	startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: kit.KafkaConfig{Brokers: k.Brokers},
		MaxAttempts: 3, BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond}})

	poison, others := relaytest.Keys(1)[0], relaytest.Keys(5)
	appendSeq := func(key string, seq, pad int) int64 {
		t.Helper()
		id, err := relaytest.TryAppendWith(pool, wr, key, seq, pad)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	appendSeq(poison, 1, 0)
	bad := appendSeq(poison, 2, 8000) // over the topic's 4096 bytes
	appendSeq(poison, 3, 0)
	appendSeq(poison, 4, 0)
	for seq := 1; seq <= 10; seq++ {
		for _, key := range others {
			appendSeq(key, seq, 0)
		}
	}
	ctx := context.Background()
	check := relaytest.NewChecker(t, k.Brokers, topic)
	check.WaitAll(others, 10, 60*time.Second)
	relaytest.WaitFor(t, 30*time.Second, "the oversized row parked", func() error {
		parked, err := outbox.Parked(ctx, pool)
		if err != nil {
			return err
		}
		if len(parked) != 1 || parked[0].ID != bad {
			return fmt.Errorf("parked rows %+v", parked)
		}
		if p := parked[0]; p.Attempts != 3 || !strings.Contains(p.LastError, "MESSAGE_TOO_LARGE") || p.Waiting != 2 {
			return fmt.Errorf("parked row %+v: want 3 attempts, MESSAGE_TOO_LARGE, 2 rows waiting", p)
		}
		return nil
	})
	// The key waits behind its parked row: seq 1 went, 3 and 4 did not.
	check.Poll(time.Second)
	if got := check.Seq(poison); got != 1 {
		t.Fatalf("poison key reached seq %d while its seq 2 is parked; want 1", got)
	}

	if err := outbox.Skip(ctx, pool, bad, "too large for the topic; re-emitted by hand"); err != nil {
		t.Fatal(err)
	}
	check.Skipped(poison, 2)
	check.WaitAll([]string{poison}, 4, 30*time.Second)
	// The key flows through the stream again.
	appendSeq(poison, 5, 0)
	check.WaitAll([]string{poison}, 5, 30*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestWALRelayParksARefusedRowPendingBeforeItsSlotExistedAndMarksOnlyAcknowledgedRows(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := newPool(t)
	limit := "4096"
	wr, topic := relaytest.WALTopic(t, k, 2, map[string]*string{"max.message.bytes": &limit})
	poison, others := relaytest.Keys(1)[0], relaytest.Keys(5)
	appendSeq := func(key string, seq, pad int) int64 {
		t.Helper()
		id, err := relaytest.TryAppendWith(pool, wr, key, seq, pad)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Every row predates the slot: the relay publishes them from the table.
	appendSeq(poison, 1, 0)
	bad := appendSeq(poison, 2, 8000) // over the topic's 4096 bytes
	appendSeq(poison, 3, 0)
	for seq := 1; seq <= 3; seq++ {
		for _, key := range others {
			appendSeq(key, seq, 0)
		}
	}
	startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: kit.KafkaConfig{Brokers: k.Brokers},
		MaxAttempts: 3, BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond}})

	ctx := context.Background()
	check := relaytest.NewChecker(t, k.Brokers, topic)
	check.WaitAll(others, 3, 60*time.Second)
	relaytest.WaitFor(t, 30*time.Second, "the oversized row parked, not marked published", func() error {
		if n := relaytest.Count(t, pool, "select count(*) from outbox where id = $1 and published_at is not null", bad); n != 0 {
			return fmt.Errorf("row %d marked published though Kafka never acknowledged it", bad)
		}
		parked, err := outbox.Parked(ctx, pool)
		if err != nil {
			return err
		}
		if len(parked) != 1 || parked[0].ID != bad {
			return fmt.Errorf("parked rows %+v", parked)
		}
		if p := parked[0]; p.Attempts != 3 || !strings.Contains(p.LastError, "MESSAGE_TOO_LARGE") || p.Waiting != 1 {
			return fmt.Errorf("parked row %+v: want 3 attempts, MESSAGE_TOO_LARGE, 1 row waiting", p)
		}
		return nil
	})
	check.Poll(time.Second)
	if got := check.Seq(poison); got != 1 {
		t.Fatalf("poison key reached seq %d while its seq 2 is parked; want 1", got)
	}
	if err := outbox.Skip(ctx, pool, bad, "too large for the topic"); err != nil {
		t.Fatal(err)
	}
	check.Skipped(poison, 2)
	check.WaitAll([]string{poison}, 3, 30*time.Second)
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// receivedRows is concord_relay_wal_received_rows_total in reg.
func receivedRows(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "concord_relay_wal_received_rows_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("concord_relay_wal_received_rows_total not registered")
	return 0
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
	pg := testkit.NewPrivatePostgres(t) // the open transaction below would hold up every slot created on the shared server
	pool := migrated(t, testkit.Pool(t, pg.URL))
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
	w := runWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: kit.KafkaConfig{Brokers: k.Brokers}, Registerer: reg},
		Slot: slot, Publication: testkit.UniqueName(t, "pub")})
	relaytest.WaitFor(t, 30*time.Second, "the relay's walsender holding its new slot", func() error {
		if relaytest.Count(t, pool, "select count(*) from pg_replication_slots where slot_name = $1 and active", slot) != 1 {
			return fmt.Errorf("slot %s not active", slot)
		}
		return nil
	})
	keys := relaytest.Keys(5)
	for _, key := range keys {
		if _, err := relaytest.TryAppendWith(pool, wr, key, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end); <-time.After(50 * time.Millisecond) {
		if w.Streaming() {
			t.Fatal("the relay streams while its slot waits for a consistent point")
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	relaytest.WaitFor(t, 30*time.Second, "WAL relay streaming", func() error {
		if !w.Streaming() {
			return errors.New("not streaming yet")
		}
		return nil
	})
	check := relaytest.NewChecker(t, k.Brokers, topic)
	check.WaitAll(keys, 1, 60*time.Second)
	if n := receivedRows(t, reg); n != 0 {
		t.Fatalf("%v rows committed before the slot's consistent point decoded from its stream; want 0 (they are published from the table)", n)
	}

	for _, key := range keys {
		if _, err := relaytest.TryAppendWith(pool, wr, key, 2, 0); err != nil {
			t.Fatal(err)
		}
	}
	check.WaitAll(keys, 2, 30*time.Second)
	relaytest.WaitFor(t, 10*time.Second, "the rows appended while streaming decoded from the stream", func() error {
		if n := receivedRows(t, reg); n != 5 {
			return fmt.Errorf("%v of 5 rows decoded", n)
		}
		return nil
	})
	if errs := check.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
}
