package publisher

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/outbox"
)

// These tests run selectBatch (through lockBatch) against a real outbox,
// without Kafka: they pin what the query itself locks and reads, apart from
// Sendable, which plan_test.go pins apart from the query.

// lockOneShard runs lockBatch over the single shard of a one-shard outbox
// in a transaction rolled back when the test ends.
func lockOneShard(t *testing.T, pool *pgxpool.Pool, limit int) ([]row, map[string][]int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "rollback")
		conn.Release()
	})
	rows, pending, err := lockBatch(ctx, conn, 1, []int32{0}, limit, DefaultReadTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return rows, pending
}

func rowIDs(rows []row) []int64 {
	ids := make([]int64, len(rows))
	for i, rw := range rows {
		ids[i] = rw.id
	}
	return ids
}

// A row locked by another transaction (another relay's batch in flight) is
// skipped by the batch, but the query still reads it as pending for its
// key, so Sendable holds the key's later rows in the batch behind it.
func TestSelectBatchReadsARowLockedByAnotherBatchAsPendingForItsKey(t *testing.T) {
	ctx := context.Background()
	pool := testkit.NewPool(t, outbox.Migrate)
	const topic = "guard"
	ks := relaytest.Keys(2)
	key, other := ks[0], ks[1]
	k1 := relaytest.Append(t, pool, topic, key, 1, 0)
	k2 := relaytest.Append(t, pool, topic, key, 2, 0)
	o1 := relaytest.Append(t, pool, topic, other, 1, 0)
	k3 := relaytest.Append(t, pool, topic, key, 3, 0)
	k4 := relaytest.Append(t, pool, topic, key, 4, 0)
	o2 := relaytest.Append(t, pool, topic, other, 2, 0)

	// Another relay's batch holds seq 2 of key.
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, "select id from outbox where id = $1 for update", k2); err != nil {
		t.Fatal(err)
	}

	rows, pending := lockOneShard(t, pool, 100)
	if got, want := rowIDs(rows), []int64{k1, o1, k3, k4, o2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("batch locked ids %v, want %v (every due row but the one held elsewhere, in id order)", got, want)
	}
	wantPending := map[string][]int64{key: {k1, k2, k3, k4}, other: {o1, o2}}
	if !reflect.DeepEqual(pending, wantPending) {
		t.Fatalf("pending ids per key %v, want %v: the row held elsewhere must be read as pending", pending, wantPending)
	}
	cands := make([]Candidate, len(rows))
	for i, rw := range rows {
		cands[i] = Candidate{ID: rw.id, Key: rw.key}
	}
	if got, want := Sendable(cands, pending), []bool{true, true, false, false, true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Sendable(ids %v) = %v, want %v: seq 3 and 4 of the key wait behind seq 2", rowIDs(rows), got, want)
	}
}

// A row whose key has an earlier row failing (in backoff or parked) is left
// out of the batch, so a blocked key's backlog cannot take the batch's
// places: here the blocked keys' rows come first in id order and alone
// would fill the batch, and the other key's row must still be locked.
func TestSelectBatchLeavesOutRowsBehindAFailingRowOfTheirKey(t *testing.T) {
	ctx := context.Background()
	pool := testkit.NewPool(t, outbox.Migrate)
	const topic = "filter"
	ks := relaytest.Keys(3)
	backingOff, parked, other := ks[0], ks[1], ks[2]
	b1 := relaytest.Append(t, pool, topic, backingOff, 1, 0)
	p1 := relaytest.Append(t, pool, topic, parked, 1, 0)
	for seq := 2; seq <= 4; seq++ {
		relaytest.Append(t, pool, topic, backingOff, seq, 0)
		relaytest.Append(t, pool, topic, parked, seq, 0)
	}
	o1 := relaytest.Append(t, pool, topic, other, 1, 0)
	if _, err := pool.Exec(ctx, `update outbox set attempts = 1, next_attempt_at = now() + interval '1 hour' where id = $1`, b1); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `update outbox set attempts = 3, parked_at = now() where id = $1`, p1); err != nil {
		t.Fatal(err)
	}

	rows, pending := lockOneShard(t, pool, 2)
	if got, want := rowIDs(rows), []int64{o1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("batch of at most 2 locked ids %v, want %v: rows behind a row in backoff or parked must not be locked", got, want)
	}
	if want := map[string][]int64{other: {o1}}; !reflect.DeepEqual(pending, want) {
		t.Fatalf("pending ids per key %v, want %v", pending, want)
	}
}

// A backlog as the relay finds it after an outage: a table too fresh for
// statistics. Read through lockBatch, a batch must still be a walk of the
// first pending rows and one probe per batch key, whatever the planner
// estimates; the indexes' counters of the batch's transaction say what it
// read. Planned on estimates, the read sorted every pending row, or read
// every pending row once per batch key: seconds a batch.
func TestTheBatchReadOfAFreshBacklogReadsOnlyTheBatchAndItsKeys(t *testing.T) {
	// Each size met a different plan: 20,000 rows the guard read once per
	// batch key, 100,000 the sort of every pending row.
	for _, backlog := range []int{20_000, 100_000} {
		t.Run(fmt.Sprint(backlog), func(t *testing.T) { freshBacklogBatch(t, backlog) })
	}
}

func freshBacklogBatch(t *testing.T, backlog int) {
	ctx := context.Background()
	pool := testkit.Pool(t, testkit.NewDatabase(t, testkit.PostgresURL(t)))
	if err := outbox.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	const keys, limit = 10_000, 1000
	if _, err := pool.Exec(ctx, `alter table outbox set (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `insert into outbox (event_id, aggregate_type, aggregate_id, partition_key, key_hash,
		topic, event_type, event_version, payload)
		select gen_random_uuid(), 'order', 'o' || i, 'k' || (i % $1), abs(hashtext('k' || (i % $1))), 'orders',
		       'order.created', 2, json_build_object('pad', repeat('x', 900))
		  from generate_series(1, $2) i`, keys, backlog); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = conn.Exec(context.Background(), "rollback")
		conn.Release()
	}()
	all := make([]int32, DefaultShards)
	for i := range all {
		all[i] = int32(i)
	}
	rows, _, err := lockBatch(ctx, conn, DefaultShards, all, limit, DefaultReadTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != limit {
		t.Fatalf("locked %d rows, want %d", len(rows), limit)
	}
	var byID, byKey, heap int64
	if err := conn.QueryRow(ctx, `select pg_stat_get_xact_tuples_returned('outbox_pending'::regclass),
		pg_stat_get_xact_tuples_returned('outbox_pending_key'::regclass),
		pg_stat_get_xact_tuples_fetched('outbox'::regclass)`).Scan(&byID, &byKey, &heap); err != nil {
		t.Fatal(err)
	}
	if byID > 2*limit || byKey > 2*limit || heap > 2*limit {
		t.Fatalf("one batch of %d over a fresh backlog of %d read %d entries of outbox_pending, %d of outbox_pending_key and %d heap rows; want at most %d each",
			limit, backlog, byID, byKey, heap, 2*limit)
	}
}

// The read timeout bounds the read alone: once the rows are in Kafka their
// marks must not be cancelled (the rows would be published again), so the
// batch's transaction goes on with the statement timeout it had.
func TestTheReadTimeoutEndsWithTheRead(t *testing.T) {
	ctx := context.Background()
	pool := testkit.NewPool(t, outbox.Migrate)
	relaytest.Append(t, pool, "readtimeout", relaytest.Keys(1)[0], 1, 0)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = conn.Exec(context.Background(), "rollback")
		_, _ = conn.Exec(context.Background(), "reset statement_timeout")
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, "set statement_timeout = '42s'"); err != nil {
		t.Fatal(err)
	}
	rows, _, err := lockBatch(ctx, conn, 1, []int32{0}, 10, 3*time.Second)
	if err != nil || len(rows) != 1 {
		t.Fatalf("locked %d rows (%v), want 1", len(rows), err)
	}
	var timeout string
	if err := conn.QueryRow(ctx, "select current_setting('statement_timeout')").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "42s" {
		t.Fatalf("statement_timeout after the read is %s, want the transaction's own 42s", timeout)
	}
}
