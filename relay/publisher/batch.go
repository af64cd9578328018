package publisher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/backoff"
	"github.com/concordhq/concord/schemas"
)

// errHeldBack marks a row not produced because an earlier row of its key
// failed in the same batch.
var errHeldBack = errors.New("held back behind an earlier failed row of its key")

// selectBatch locks the next due rows of the given shards in id order and,
// in the same statement, reads the guard: every pending row of the batch's
// keys that is not in the batch and comes before the key's last row in it
// (locked by another transaction, in backoff, parked). It returns the batch
// rows first (candidate true, in id order), then the guard rows with only id
// and partition_key set. One statement instead of a lock query and a guard
// query saves a round trip per batch, and the guard is an index-only probe
// of outbox_pending_key per key, so it costs the same however long the
// backlog is.
//
// A row whose key has an earlier row failing (in backoff or parked) is left
// out of the batch, so a blocked key's backlog cannot fill the batches of
// the others; Sendable then applies the rest of the guard.
//
// Its plan must not depend on statistics: a backlog that built up during an
// outage is what the relay reads most urgently, and the table's statistics
// then describe an outbox of a few rows (or none). The guard is a lateral
// subquery (offset 0 keeps it one) probed per batch key, and its bound is a
// row comparison only outbox_pending_key can serve: written as a join on
// p.id < k.last_id, the planner read every pending row once per batch key
// (1.7 s for a batch over 20,000 fresh rows), or probed outbox_pending by
// id. lockBatch turns bitmap scans off for the first part: on a fresh table
// of 100,000 rows the planner collected every pending row and sorted them on
// disk to take the first thousand (0.5 s a batch).
const selectBatch = `
with batch as materialized (
select o.id, o.event_id, o.partition_key, o.topic, o.event_type, o.event_version,
       o.payload, o.headers, o.created_at, o.attempts
  from outbox o
 where o.published_at is null and o.skipped_at is null and o.parked_at is null
   and (o.next_attempt_at is null or o.next_attempt_at <= now())
   and o.key_hash % $1 = any($2::int[])
   and not exists (
       select 1 from outbox f
        where f.partition_key = o.partition_key and f.id < o.id
          and f.published_at is null and f.skipped_at is null and f.attempts > 0
          and (f.parked_at is not null or f.next_attempt_at > now()))
 order by o.id
 limit $3
 for update of o skip locked),
batch_keys as materialized (select partition_key, max(id) as last_id from batch group by partition_key)
select * from (
  select true as candidate, b.id, b.event_id::text, b.partition_key, b.topic, b.event_type, b.event_version,
         b.payload::text, b.headers, b.created_at, b.attempts
    from batch b
  union all
  select false, p.id, null, k.partition_key, null, null, null, null, null, null, null
    from batch_keys k
   cross join lateral (
         select p.id from outbox p
          where p.partition_key = k.partition_key
            and (p.partition_key, p.id) < (k.partition_key, k.last_id)
            and p.published_at is null and p.skipped_at is null
         offset 0) p
   where not exists (select 1 from batch b where b.id = p.id)
) r
order by candidate desc, id`

// readPlan keeps selectBatch's first part an ordered walk of
// outbox_pending whatever the statistics say (see selectBatch), and bounds
// the read ($1, Config.ReadTimeout). It saves the statement timeout it
// replaces, which readDone puts back: the marks that follow in the batch's
// transaction must not be cancelled once Kafka has the rows (they would
// be published again). Bitmap scans stay off for them; they look rows up by
// id.
const (
	readPlan = `select set_config('concord.statement_timeout', current_setting('statement_timeout'), true),
	                   set_config('enable_bitmapscan', 'off', true)`
	readTimeout = `select set_config('statement_timeout', $1, true)`
	readDone    = `select set_config('statement_timeout', current_setting('concord.statement_timeout'), true)`
)

const markPublished = `update outbox set published_at = now() where id = any($1::bigint[])`

const markFailed = `
update outbox o
   set attempts = f.attempts, last_error = f.err,
       next_attempt_at = now() + f.delay_ms * interval '1 millisecond',
       parked_at = case when f.park then now() end
  from unnest($1::bigint[], $2::int[], $3::text[], $4::bigint[], $5::bool[]) as f(id, attempts, err, delay_ms, park)
 where o.id = f.id`

type row struct {
	id        int64
	eventID   string
	key       string
	topic     string
	eventType string
	version   int
	payload   []byte
	headers   map[string]string
	createdAt time.Time
	attempts  int
	read      time.Time // when the relay read it (Ack.Read)
}

// batchResult says what one round of a worker did: the batch it read and
// the batches it settled.
type batchResult struct {
	locked, sent, published, failed int
	// held counts rows a batch locked but held back behind an earlier row
	// of their key, and has released since (committed) unpublished.
	held int
}

// more reports whether rows may be due right after the round: its read
// locked a full batch (the rest of the backlog waits), or rows failed, or
// the round released rows it held back and published rows (perhaps the
// ones they waited for). Otherwise every row that was due when the batch
// was read is in it; a row committed since announces itself with a
// NOTIFY, so reading again at once would find nothing. Rows held back
// behind another holder's batch, with nothing published, are left to the
// poll: that holder's commit sends no NOTIFY, and reading again at once
// would spin until it comes.
func (b batchResult) more(batchSize int) bool {
	return b.locked >= batchSize || b.failed > 0 || b.held > 0 && b.published > 0
}

// flight is a batch whose records are with the producer: its transaction,
// open on conn, holds the row locks until every record has its answer and
// the rows are marked. The transaction is driven with plain statements
// rather than pgx.Tx so that BEGIN travels with the batch query and COMMIT
// with the marks: two round trips per batch instead of four.
type flight struct {
	conn   *pgxpool.Conn
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	locked int
	rows   []row   // produced rows, in id order
	errs   []error // one per row, complete once wait returns
	wait   func()
}

// runWorker runs batches over the worker's shards until ctx is done. When
// the pool has room (see Relay.pipelined), batches overlap: batch N+1 is
// locked and produced while batch N waits for its acks, and N is settled
// (marked, committed) after that. Order needs nothing more: N's rows are
// still locked and unmarked while N+1 is read, so SKIP LOCKED leaves them
// out and the guard holds back every later row of their keys until N is
// committed; rows of different keys have no order to keep.
func (r *Relay) runWorker(ctx context.Context, i int) {
	retry := backoff.Loop{First: r.cfg.BackoffMin, Max: 5 * time.Second}
	var inFlight *flight
	defer func() {
		// Drain: the last batch's acks are waited for and its rows marked,
		// whatever ctx says.
		if inFlight != nil {
			if _, err := r.settle(inFlight); err != nil {
				r.log.Warn("outbox batch failed while draining", "worker", i, "err", err)
			}
		}
	}()
	read := true
	for ctx.Err() == nil {
		var next *flight
		var res batchResult
		var err error
		if shards := r.owner.shardsFor(i, r.cfg.Workers); read && len(shards) > 0 {
			next, res, err = r.start(ctx, shards)
		}
		if inFlight != nil {
			done, serr := r.settle(inFlight)
			inFlight = nil
			if serr != nil {
				err = errors.Join(err, serr)
			}
			res.published += done.published
			res.failed += done.failed
			res.held += done.held
		}
		if next != nil && !r.pipelined {
			done, serr := r.settle(next)
			next = nil
			if serr != nil {
				err = errors.Join(err, serr)
			}
			res.published += done.published
			res.failed += done.failed
			res.held += done.held
		}
		inFlight = next
		read = true
		if err != nil {
			wait := retry.Failed()
			if ctx.Err() == nil {
				r.log.Warn("outbox batch failed; retrying", "worker", i, "err", err, "retry_in", wait)
			}
			if inFlight == nil {
				r.sleep(ctx, -1, wait)
			}
			continue
		}
		retry.Succeeded()
		switch {
		case res.more(r.cfg.BatchSize):
			continue // read again at once
		case inFlight != nil:
			// Settle it; read beside it only if a commit woke the worker
			// since this batch was read.
			read = r.woken(i)
			continue
		}
		r.sleep(ctx, i, r.cfg.PollInterval)
	}
}

// start locks the next batch of the given shards, decides which rows may be
// produced and hands them to the producer without waiting for the answers.
// It returns nil when nothing was sendable (the transaction is then already
// committed). Once rows are locked it ignores ctx: a SIGTERM lets the batch
// finish (acks waited for, rows marked) so the drain does not produce
// duplicates.
func (r *Relay) start(ctx context.Context, shards []int32) (*flight, batchResult, error) {
	var res batchResult
	if err := ctx.Err(); err != nil {
		return nil, res, err
	}
	f := &flight{start: time.Now()}
	f.ctx, f.cancel = context.WithTimeout(context.WithoutCancel(ctx), r.cfg.DeliveryTimeout+time.Minute)
	conn, err := r.cfg.Pool.Acquire(f.ctx)
	if err != nil {
		f.cancel()
		return nil, res, fmt.Errorf("acquire a connection: %w", err)
	}
	f.conn = conn
	rows, pending, err := lockBatch(f.ctx, conn, r.cfg.Shards, shards, r.cfg.BatchSize, r.cfg.ReadTimeout)
	if err != nil || len(rows) == 0 {
		f.abort()
		switch {
		case err == nil:
			r.m.reads.WithLabelValues("empty").Inc()
		case timedOut(err):
			r.m.reads.WithLabelValues("timeout").Inc()
			r.stats.refresh(ctx, r.cfg.Pool, r.log)
		}
		return nil, res, err
	}
	r.m.reads.WithLabelValues("rows").Inc()
	f.locked, res.locked = len(rows), len(rows)

	cands := make([]Candidate, len(rows))
	for i, rw := range rows {
		cands[i] = Candidate{ID: rw.id, Key: rw.key}
	}
	ok := Sendable(cands, pending)
	for i, rw := range rows {
		if ok[i] {
			f.rows = append(f.rows, rw)
		}
	}
	if len(f.rows) == 0 {
		// Every row waits behind an earlier row of its key held elsewhere
		// (often this worker's own batch in flight): release the locks now.
		defer f.abort()
		if _, err := conn.Exec(f.ctx, "commit"); err != nil {
			return nil, res, fmt.Errorf("commit a batch of %d held-back rows: %w", len(rows), err)
		}
		res.held = len(rows)
		return nil, res, nil
	}
	res.sent = len(f.rows)
	f.errs, f.wait = r.produce(f.ctx, f.rows)
	return f, res, nil
}

// abort rolls back the flight's transaction if it is still open, and
// returns the connection to the pool (which closes it if the rollback could
// not be sent) and releases the context.
func (f *flight) abort() {
	if f.conn != nil {
		if f.conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = f.conn.Exec(f.ctx, "rollback")
		}
		f.conn.Release()
		f.conn = nil
	}
	f.cancel()
}

// settle waits for every answer of the flight's records, marks the
// acknowledged rows published and the failed ones for backoff or parking,
// in one transaction with the locks taken by start.
func (r *Relay) settle(f *flight) (res batchResult, err error) {
	defer f.abort() // no-op after commit
	f.wait()
	res.locked, res.sent = f.locked, len(f.rows)
	keys := make([]string, len(f.rows))
	for i, rw := range f.rows {
		keys[i] = rw.key
	}
	verdicts, overtaken := Settle(keys, f.errs)
	if overtaken > 0 {
		r.m.overtaken.Add(float64(overtaken))
		r.log.Error("records acknowledged after an earlier record of their key failed; they stay pending and go again in order", "count", overtaken)
	}

	var pubIDs []int64
	var failed failedRows
	for i, v := range verdicts {
		rw := f.rows[i]
		switch v {
		case Publish:
			pubIDs = append(pubIDs, rw.id)
		case Fail:
			failed.add(rw, f.errs[i], r.cfg)
			r.logFailure(rw, f.errs[i], failed.park[len(failed.park)-1])
		}
	}
	// The marks and the commit go in one round trip. If a mark fails the
	// server skips the rest of the pipeline, COMMIT included, and abort rolls
	// back: nothing is marked and the rows go again.
	b := &pgx.Batch{}
	if len(pubIDs) > 0 {
		b.Queue(markPublished, pubIDs)
	}
	if len(failed.ids) > 0 {
		b.Queue(markFailed, failed.ids, failed.attempts, failed.errs, failed.delayMS, failed.park)
	}
	b.Queue("commit")
	if err := f.conn.SendBatch(f.ctx, b).Close(); err != nil {
		return res, fmt.Errorf("mark %d rows published and %d failed, and commit (ids %d..%d): %w",
			len(pubIDs), len(failed.ids), f.rows[0].id, f.rows[len(f.rows)-1].id, err)
	}
	if st := f.conn.Conn().PgConn().TxStatus(); st != 'I' {
		return res, fmt.Errorf("commit batch of %d rows (ids %d..%d): transaction status %q after commit",
			len(f.rows), f.rows[0].id, f.rows[len(f.rows)-1].id, st)
	}
	res.published, res.failed, res.held = len(pubIDs), len(failed.ids), f.locked-len(f.rows)
	for i, v := range verdicts {
		rw := f.rows[i]
		switch v {
		case Publish:
			r.m.published.WithLabelValues(rw.topic).Inc()
		case Fail:
			kind := "transient"
			if Refused(f.errs[i]) {
				kind = "refused"
			}
			r.m.failures.WithLabelValues(rw.topic, kind).Inc()
		}
	}
	for _, p := range failed.park {
		if p {
			r.m.parkedTotal.Inc()
		}
	}
	r.m.batch.Observe(time.Since(f.start).Seconds())
	return res, nil
}

// lockBatch opens a transaction on conn and runs selectBatch in it, in one
// round trip. It returns the locked rows in id order and, per key of the
// batch, its pending ids up to its last row in the batch (the batch's own
// rows and the guard rows), ascending, as Sendable wants them. On an error
// the transaction may be open or failed; the caller rolls it back.
func lockBatch(ctx context.Context, conn *pgxpool.Conn, shardCount int, shards []int32, limit int, timeout time.Duration) ([]row, map[string][]int64, error) {
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(readPlan)
	b.Queue(readTimeout, fmt.Sprintf("%dms", max(timeout.Milliseconds(), 1)))
	b.Queue(selectBatch, shardCount, shards, limit)
	b.Queue(readDone)
	br := conn.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, nil, fmt.Errorf("begin: %w", err)
	}
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return nil, nil, fmt.Errorf("set the batch read's plan: %w", err)
		}
	}
	q, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("select outbox batch: %w", err)
	}
	defer q.Close()
	var rows []row
	pending := map[string][]int64{}
	var guard bool
	read := time.Now()
	for q.Next() {
		var candidate bool
		var rw row
		if err := q.Scan(&candidate, &rw.id, nil, &rw.key, nil, nil, nil, nil, nil, nil, nil); err != nil {
			return nil, nil, fmt.Errorf("select outbox batch: %w", err)
		}
		if candidate {
			if err := q.Scan(nil, nil, &rw.eventID, nil, &rw.topic, &rw.eventType, &rw.version,
				&rw.payload, &rw.headers, &rw.createdAt, &rw.attempts); err != nil {
				return nil, nil, fmt.Errorf("select outbox batch, row %d: %w", rw.id, err)
			}
			rw.read = read
			rows = append(rows, rw)
		} else {
			guard = true
		}
		pending[rw.key] = append(pending[rw.key], rw.id)
	}
	if err := q.Err(); err != nil {
		return nil, nil, fmt.Errorf("select outbox batch: %w", err)
	}
	q.Close()
	if _, err := br.Exec(); err != nil {
		return nil, nil, fmt.Errorf("end the batch read's timeout: %w", err)
	}
	if guard {
		// Guard rows came after the batch: put each key's ids back in order.
		for _, ids := range pending {
			slices.Sort(ids)
		}
	}
	return rows, pending, nil
}

// produce hands the rows to the producer in id order and returns their
// answers, which are complete once wait returns. A row whose key already
// failed in this batch is not produced at all (errHeldBack), nor is a row
// larger than its topic accepts.
func (r *Relay) produce(ctx context.Context, rows []row) (errs []error, wait func()) {
	r.mu.Lock()
	cl, adm := r.client, r.adm
	r.mu.Unlock()

	topics := map[string]bool{}
	var list []string
	for _, rw := range rows {
		if !topics[rw.topic] {
			topics[rw.topic] = true
			list = append(list, rw.topic)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	r.limits.load(lctx, adm, list)
	cancel()

	errs = make([]error, len(rows))
	var mu sync.Mutex
	failedKey := map[string]bool{}
	var wg sync.WaitGroup
	for i, rw := range rows {
		mu.Lock()
		held := failedKey[rw.key]
		mu.Unlock()
		if held {
			errs[i] = errHeldBack
			continue
		}
		rec := r.record(rw)
		limit := int32(r.cfg.MaxMessageBytes)
		if l, ok := r.limits.get(rw.topic); ok {
			limit = l
		}
		if size := recordSize(rec); size > int(limit) {
			errs[i] = errTooLarge(size, limit, rw.topic)
			mu.Lock()
			failedKey[rw.key] = true
			mu.Unlock()
			continue
		}
		wg.Add(1)
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			acked := time.Now()
			if err != nil {
				mu.Lock()
				errs[i] = err
				failedKey[rw.key] = true
				mu.Unlock()
				return
			}
			r.m.latency.Observe(acked.Sub(rw.createdAt).Seconds())
			if r.cfg.OnAck != nil {
				r.cfg.OnAck(Ack{EventID: rw.eventID, Inserted: rw.createdAt, Read: rw.read, Acked: acked})
			}
		})
	}
	return errs, wg.Wait
}

func (r *Relay) record(rw row) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, 4+len(rw.headers))
	hs = append(hs,
		kgo.RecordHeader{Key: schemas.HeaderEventID, Value: []byte(rw.eventID)},
		kgo.RecordHeader{Key: schemas.HeaderEventType, Value: []byte(rw.eventType)},
		kgo.RecordHeader{Key: schemas.HeaderEventVersion, Value: []byte(strconv.Itoa(rw.version))},
		kgo.RecordHeader{Key: schemas.HeaderContentType, Value: []byte(schemas.ContentTypeJSON)},
	)
	for k, v := range rw.headers {
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return withTrace(&kgo.Record{Topic: rw.topic, Key: []byte(rw.key), Value: rw.payload, Headers: hs}, rw.headers)
}

func recordSize(rec *kgo.Record) int {
	n := recordOverhead + len(rec.Key) + len(rec.Value)
	for _, h := range rec.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// failedRows collects the failure updates of one batch as column arrays for
// one unnest statement.
type failedRows struct {
	ids      []int64
	attempts []int32
	errs     []string
	delayMS  []int64
	park     []bool
}

func (f *failedRows) add(rw row, err error, cfg Config) {
	attempts := rw.attempts + 1
	park := Park(attempts, cfg.MaxAttempts, Refused(err))
	f.ids = append(f.ids, rw.id)
	f.attempts = append(f.attempts, int32(attempts))
	f.errs = append(f.errs, fmt.Sprintf("produce event %s (%s) to topic %s, key %s: %v", rw.eventID, rw.eventType, rw.topic, rw.key, err))
	f.delayMS = append(f.delayMS, backoff.Exponential(attempts, cfg.BackoffMin, cfg.BackoffMax).Milliseconds())
	f.park = append(f.park, park)
}

func (r *Relay) logFailure(rw row, err error, parked bool) {
	attrs := []any{"outbox_id", rw.id, "event_id", rw.eventID, "topic", rw.topic, "key", rw.key,
		"attempts", rw.attempts + 1, "err", err}
	if parked {
		r.log.Error("outbox row parked: its key waits until `relay outbox retry|skip`", attrs...)
		return
	}
	r.log.Warn("outbox row failed; backing off", attrs...)
}
