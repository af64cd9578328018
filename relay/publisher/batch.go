package publisher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/schemas"
)

// errHeldBack marks a row not produced because an earlier row of its key
// failed in the same batch.
var errHeldBack = errors.New("held back behind an earlier failed row of its key")

// selectBatch locks the next due rows of the given shards in id order. A row
// whose key has an earlier row failing (in backoff or parked) is left out
// here, so a blocked key's backlog cannot fill the batches of the others;
// Sendable then checks the rest of the guard.
const selectBatch = `
select o.id, o.event_id::text, o.partition_key, o.topic, o.event_type, o.event_version,
       o.payload::text, o.headers, o.created_at, o.attempts
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
 for update of o skip locked`

// selectPending reads every pending row of the batch's keys up to its last
// id, locked or not: the other half of the per-key guard.
const selectPending = `
select partition_key, id from outbox
 where published_at is null and skipped_at is null
   and partition_key = any($1::text[]) and id <= $2
 order by partition_key, id`

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
	payload   string
	headers   map[string]string
	createdAt time.Time
	attempts  int
}

// batchResult says what one batch did.
type batchResult struct {
	locked, sent, published, failed int
}

func (r *Relay) runWorker(ctx context.Context, i int) {
	errWait := r.cfg.BackoffMin
	for ctx.Err() == nil {
		shards := r.owner.shardsFor(i, r.cfg.Workers)
		if len(shards) == 0 {
			r.sleep(ctx, i, r.cfg.PollInterval)
			continue
		}
		res, err := r.batch(ctx, shards)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("outbox batch failed; retrying", "worker", i, "err", err, "retry_in", errWait)
			}
			r.sleep(ctx, -1, errWait)
			errWait = min(errWait*2, 5*time.Second)
			continue
		}
		errWait = r.cfg.BackoffMin
		if res.published > 0 || res.failed > 0 {
			continue // progress: more may be due right away
		}
		r.sleep(ctx, i, r.cfg.PollInterval)
	}
}

// batch runs one select → produce → wait for every answer → mark → commit
// cycle over the given shards. Once rows are locked it ignores ctx: a
// SIGTERM lets the batch finish (acks waited for, rows marked) so the drain
// does not produce duplicates.
func (r *Relay) batch(ctx context.Context, shards []int32) (res batchResult, err error) {
	if err := ctx.Err(); err != nil {
		return res, err
	}
	start := time.Now()
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.DeliveryTimeout+time.Minute)
	defer cancel()
	tx, err := r.cfg.Pool.Begin(bctx)
	if err != nil {
		return res, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(bctx) //nolint:errcheck // no-op after commit

	rows, err := r.lockBatch(bctx, tx, shards)
	if err != nil || len(rows) == 0 {
		return res, err
	}
	res.locked = len(rows)

	keys := make([]string, 0, len(rows))
	seen := make(map[string]bool, len(rows))
	cands := make([]Candidate, len(rows))
	for i, rw := range rows {
		cands[i] = Candidate{ID: rw.id, Key: rw.key}
		if !seen[rw.key] {
			seen[rw.key] = true
			keys = append(keys, rw.key)
		}
	}
	pending, err := readPending(bctx, tx, keys, rows[len(rows)-1].id)
	if err != nil {
		return res, err
	}
	ok := Sendable(cands, pending)
	var send []row
	for i, rw := range rows {
		if ok[i] {
			send = append(send, rw)
		}
	}
	if len(send) == 0 {
		return res, tx.Commit(bctx)
	}

	errs := r.produce(bctx, send)
	res.sent = len(send)
	sentKeys := make([]string, len(send))
	for i, rw := range send {
		sentKeys[i] = rw.key
	}
	verdicts, overtaken := Settle(sentKeys, errs)
	if overtaken > 0 {
		r.m.overtaken.Add(float64(overtaken))
		r.log.Error("records acknowledged after an earlier record of their key failed; they stay pending and go again in order", "count", overtaken)
	}

	var pubIDs []int64
	var f failedRows
	for i, v := range verdicts {
		rw := send[i]
		switch v {
		case Publish:
			pubIDs = append(pubIDs, rw.id)
		case Fail:
			f.add(rw, errs[i], r.cfg)
			r.logFailure(rw, errs[i], f.park[len(f.park)-1])
		}
	}
	if len(pubIDs) > 0 {
		if _, err := tx.Exec(bctx, markPublished, pubIDs); err != nil {
			return res, fmt.Errorf("mark %d rows published (ids %d..%d): %w", len(pubIDs), pubIDs[0], pubIDs[len(pubIDs)-1], err)
		}
	}
	if len(f.ids) > 0 {
		if _, err := tx.Exec(bctx, markFailed, f.ids, f.attempts, f.errs, f.delayMS, f.park); err != nil {
			return res, fmt.Errorf("record failures of %d rows (first id %d): %w", len(f.ids), f.ids[0], err)
		}
	}
	if err := tx.Commit(bctx); err != nil {
		return res, fmt.Errorf("commit batch of %d rows: %w", len(send), err)
	}
	res.published, res.failed = len(pubIDs), len(f.ids)
	for i, v := range verdicts {
		rw := send[i]
		switch v {
		case Publish:
			r.m.published.WithLabelValues(rw.topic).Inc()
		case Fail:
			kind := "transient"
			if Refused(errs[i]) {
				kind = "refused"
			}
			r.m.failures.WithLabelValues(rw.topic, kind).Inc()
		}
	}
	for _, p := range f.park {
		if p {
			r.m.parkedTotal.Inc()
		}
	}
	r.m.batch.Observe(time.Since(start).Seconds())
	return res, nil
}

func (r *Relay) lockBatch(ctx context.Context, tx pgx.Tx, shards []int32) ([]row, error) {
	q, err := tx.Query(ctx, selectBatch, r.cfg.Shards, shards, r.cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("select outbox batch: %w", err)
	}
	rows, err := pgx.CollectRows(q, func(c pgx.CollectableRow) (row, error) {
		var rw row
		err := c.Scan(&rw.id, &rw.eventID, &rw.key, &rw.topic, &rw.eventType, &rw.version,
			&rw.payload, &rw.headers, &rw.createdAt, &rw.attempts)
		return rw, err
	})
	if err != nil {
		return nil, fmt.Errorf("select outbox batch: %w", err)
	}
	return rows, nil
}

func readPending(ctx context.Context, tx pgx.Tx, keys []string, maxID int64) (map[string][]int64, error) {
	q, err := tx.Query(ctx, selectPending, keys, maxID)
	if err != nil {
		return nil, fmt.Errorf("read pending rows of %d keys: %w", len(keys), err)
	}
	defer q.Close()
	pending := make(map[string][]int64, len(keys))
	var key string
	var id int64
	_, err = pgx.ForEachRow(q, []any{&key, &id}, func() error {
		pending[key] = append(pending[key], id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read pending rows of %d keys: %w", len(keys), err)
	}
	return pending, nil
}

// produce sends the rows in id order and returns each one's answer once
// every record has one. A row whose key already failed in this batch is not
// produced at all (errHeldBack).
func (r *Relay) produce(ctx context.Context, rows []row) []error {
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

	errs := make([]error, len(rows))
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
				r.cfg.OnAck(rw.eventID, rw.createdAt, acked)
			}
		})
	}
	wg.Wait()
	return errs
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
	return &kgo.Record{Topic: rw.topic, Key: []byte(rw.key), Value: []byte(rw.payload), Headers: hs}
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
	f.delayMS = append(f.delayMS, Backoff(attempts, cfg.BackoffMin, cfg.BackoffMax).Milliseconds())
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
