package idempotent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/relay/outbox"
)

// batchResult is what one committed batch did, per partition: a batch
// that joined several partitions' batches (Config.JoinPartitions) has
// several.
type batchResult map[topicPartition]*counts

type counts struct {
	applied, duplicates, deadLettered, ignored int
}

// at is the counts of rec's partition.
func (res batchResult) at(rec *kgo.Record) *counts {
	tp := topicPartition{rec.Topic, rec.Partition}
	c := res[tp]
	if c == nil {
		c = &counts{}
		res[tp] = c
	}
	return c
}

// of is what the batch did to partition tp's records.
func (res batchResult) of(tp topicPartition) counts {
	if c := res[tp]; c != nil {
		return *c
	}
	return counts{}
}

// spansPartitions reports whether recs come from more than one partition.
func spansPartitions(recs []decoded) bool {
	for _, d := range recs[1:] {
		if d.rec.Partition != recs[0].rec.Partition || d.rec.Topic != recs[0].rec.Topic {
			return true
		}
	}
	return false
}

// errNeedSavepoints aborts the fast path of a batch: a handler failed
// permanently, so the batch is redone with one savepoint per record to
// dead-letter just that record.
var errNeedSavepoints = errors.New("handler failed permanently; redo batch with savepoints")

// deadLetter is a record on its way to the DLQ.
type deadLetter struct {
	d      decoded
	reason string
	err    error
}

// applyBatch applies one batch in one transaction and commits it: the
// records of one partition, or of several (Config.JoinPartitions), each
// partition's in offset order. It returns an error only for transient
// failures; nothing of the batch is committed then.
//
// The fast path records all events of the batch with one multi-row INSERT …
// ON CONFLICT DO NOTHING RETURNING event_id and calls the handler of each
// new one without savepoints (a BatchHandler once, with all of them). Only if a handler fails permanently is the
// transaction rolled back and the batch redone on the careful path, which
// wraps each record (its dedupe row and its handler) in a savepoint so that
// rolling back the failed record leaves the others' effects intact. The
// outcome is the same as savepoints everywhere; the fast path saves two
// round trips per event in the common case.
func (r *Runner) applyBatch(ctx context.Context, recs []decoded) (batchResult, error) {
	// Records of types the handler ignores take no part; a batch of only
	// those needs no transaction at all.
	ignored := func(d decoded) bool { return d.ignored }
	kept := recs
	if slices.ContainsFunc(recs, ignored) {
		kept = slices.DeleteFunc(slices.Clone(recs), ignored)
	}
	res := batchResult{}
	if len(kept) > 0 {
		var err error
		res, err = r.applyFast(ctx, kept)
		if errors.Is(err, errNeedSavepoints) {
			res, err = r.applyCareful(ctx, kept)
		}
		if err != nil {
			return res, err
		}
	}
	for _, d := range recs {
		if d.ignored {
			res.at(d.rec).ignored++
		}
	}
	return res, nil
}

func (r *Runner) applyFast(ctx context.Context, recs []decoded) (res batchResult, err error) {
	tx, err := r.cfg.Pool.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("begin: %w", err)
	}
	defer rollback(tx, &err)
	res = batchResult{}

	fresh, err := r.recordAll(ctx, tx, recs)
	if err != nil {
		return res, err
	}
	var dead []deadLetter
	var batch []Event // for a BatchHandler: the new events, in order
	var batchRecs []decoded
	if r.cfg.BatchHandler != nil {
		batch, batchRecs = make([]Event, 0, len(fresh)), make([]decoded, 0, len(fresh))
	}
	out := r.cfg.Outbox.NewBuffer() // every handler's events, written before the commit
	for _, d := range recs {
		switch {
		case d.reason != "":
			dead = append(dead, deadLetter{d: d, reason: d.reason, err: d.err})
		case fresh[d.id]:
			delete(fresh, d.id) // a second copy later in the batch is a duplicate
			res.at(d.rec).applied++
			if r.cfg.BatchHandler != nil {
				batch = append(batch, d.ev)
				batchRecs = append(batchRecs, d)
				continue
			}
			hctx, span := r.startEvent(ctx, d, false)
			herr := r.handle(hctx, tx, d.ev, outbox.TracedEmitter(hctx, out))
			endSpan(span, herr)
			if herr != nil {
				if Classify(herr) == PermanentFailure {
					return res, errNeedSavepoints
				}
				return res, eventErr(d, herr)
			}
		default:
			res.at(d.rec).duplicates++
			r.markDuplicate(ctx, d)
		}
	}
	if len(batch) > 0 {
		bctx, spans, emit := r.startBatch(ctx, batchRecs, out)
		herr := r.handleBatch(bctx, tx, batch, emit)
		for _, span := range spans {
			endSpan(span, herr)
		}
		if herr != nil {
			if Classify(herr) == PermanentFailure {
				return res, errNeedSavepoints
			}
			return res, batchErr(batchRecs, herr)
		}
	}
	if err := out.Flush(ctx, tx); err != nil {
		if Classify(err) == PermanentFailure {
			return res, errNeedSavepoints
		}
		return res, err
	}
	return r.finish(ctx, tx, recs, dead, res)
}

func (r *Runner) applyCareful(ctx context.Context, recs []decoded) (res batchResult, err error) {
	tx, err := r.cfg.Pool.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("begin: %w", err)
	}
	defer rollback(tx, &err)
	res = batchResult{}

	var dead []deadLetter
	for _, d := range recs {
		if d.reason != "" {
			dead = append(dead, deadLetter{d: d, reason: d.reason, err: d.err})
			continue
		}
		sp, err := tx.Begin(ctx) // SAVEPOINT
		if err != nil {
			return res, eventErr(d, fmt.Errorf("savepoint: %w", err))
		}
		tag, err := sp.Exec(ctx, insertOne, r.cfg.Group, d.id, d.rec.Topic, d.rec.Partition, d.rec.Offset)
		if err != nil {
			return res, eventErr(d, fmt.Errorf("record processed event: %w", err))
		}
		if tag.RowsAffected() == 0 {
			res.at(d.rec).duplicates++
			r.markDuplicate(ctx, d)
			if err := sp.Commit(ctx); err != nil { // RELEASE SAVEPOINT
				return res, eventErr(d, err)
			}
			continue
		}
		out := r.cfg.Outbox.NewBuffer()
		hctx, span := r.startEvent(ctx, d, false)
		herr := r.handleOne(hctx, sp, d.ev, outbox.TracedEmitter(hctx, out))
		if herr == nil {
			herr = out.Flush(hctx, sp) // in the savepoint: a dead letter's events go with it
		}
		endSpan(span, herr)
		if herr != nil {
			// Undo the handler's partial effect and the dedupe row, so
			// that a fixed handler applies the event when it is replayed.
			if err := sp.Rollback(ctx); err != nil {
				return res, eventErr(d, fmt.Errorf("rollback to savepoint after %v: %w", herr, err))
			}
			if Classify(herr) != PermanentFailure {
				return res, eventErr(d, herr)
			}
			dead = append(dead, deadLetter{d: d, reason: ReasonHandler, err: eventErr(d, herr)})
			continue
		}
		if err := sp.Commit(ctx); err != nil {
			return res, eventErr(d, err)
		}
		res.at(d.rec).applied++
	}
	return r.finish(ctx, tx, recs, dead, res)
}

// finish records the batch's dead letters, publishes the new ones to the
// DLQ, and commits. The DLQ produce happens before the commit: if the commit
// fails, the retry re-publishes (at-least-once into the DLQ, deduplicated in
// dead_letters); if the produce fails, nothing is committed and the batch
// is retried.
func (r *Runner) finish(ctx context.Context, tx pgx.Tx, recs []decoded, dead []deadLetter, res batchResult) (batchResult, error) {
	var publish []*kgo.Record
	for _, dl := range dead {
		rec, fresh, err := r.recordDeadLetter(ctx, tx, dl)
		if err != nil {
			return res, err
		}
		if fresh {
			publish = append(publish, rec)
		}
		res.at(dl.d.rec).deadLettered++
	}
	if len(publish) > 0 {
		if err := r.cl.ProduceSync(ctx, publish...).FirstErr(); err != nil {
			return res, fmt.Errorf("publish %d dead letters to %s: %w", len(publish), r.cfg.DLQTopic, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		last := recs[len(recs)-1].rec
		return res, fmt.Errorf("commit batch %s/%d@%d..%d: %w", last.Topic, last.Partition, recs[0].rec.Offset, last.Offset, err)
	}
	return res, nil
}

const insertMany = `
INSERT INTO processed_events (consumer_group, event_id, topic, partition, "offset")
SELECT $1, e.id, $2, $3, e.off FROM unnest($4::uuid[], $5::bigint[]) WITH ORDINALITY AS e(id, off, n)
ORDER BY e.n
ON CONFLICT (consumer_group, event_id) DO NOTHING
RETURNING event_id`

// insertManyJoined is insertMany for a batch of several partitions.
const insertManyJoined = `
INSERT INTO processed_events (consumer_group, event_id, topic, partition, "offset")
SELECT $1, e.id, e.topic, e.part, e.off FROM unnest($2::uuid[], $3::text[], $4::int[], $5::bigint[]) WITH ORDINALITY AS e(id, topic, part, off, n)
ORDER BY e.n
ON CONFLICT (consumer_group, event_id) DO NOTHING
RETURNING event_id`

const insertOne = `
INSERT INTO processed_events (consumer_group, event_id, topic, partition, "offset")
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (consumer_group, event_id) DO NOTHING`

// recordAll inserts the dedupe rows of every decodable record of the batch
// and returns the ids the insert reported as new. Inserting first is the
// point: a concurrent transaction inserting the same id waits on the
// primary key and then sees the conflict, so at most one of them runs the
// handler. Within the batch, the first copy of an id wins.
func (r *Runner) recordAll(ctx context.Context, tx pgx.Tx, recs []decoded) (map[uuid.UUID]bool, error) {
	// [16]byte, not uuid.UUID: pgx encodes and scans it in binary, where a
	// uuid.UUID goes through its driver.Valuer, a string parsed back into
	// bytes for every id (a tenth of the runner's CPU time in the consumer
	// benchmark's profile).
	// A batch of several partitions (Config.JoinPartitions) also sends each
	// event's topic and partition.
	joined := spansPartitions(recs)
	ids := make([][16]byte, 0, len(recs))
	offs := make([]int64, 0, len(recs))
	var topics []string
	var parts []int32
	if joined {
		topics, parts = make([]string, 0, len(recs)), make([]int32, 0, len(recs))
	}
	for _, d := range recs {
		if d.reason == "" {
			ids = append(ids, d.id)
			offs = append(offs, d.rec.Offset)
			if joined {
				topics, parts = append(topics, d.rec.Topic), append(parts, d.rec.Partition)
			}
		}
	}
	fresh := make(map[uuid.UUID]bool, len(ids))
	if len(ids) == 0 {
		return fresh, nil
	}
	first := recs[0].rec
	var rows pgx.Rows
	var err error
	if joined {
		rows, err = tx.Query(ctx, insertManyJoined, r.cfg.Group, ids, topics, parts, offs)
	} else {
		rows, err = tx.Query(ctx, insertMany, r.cfg.Group, first.Topic, first.Partition, ids, offs)
	}
	if err != nil {
		return nil, fmt.Errorf("record processed events %s/%d@%d: %w", first.Topic, first.Partition, first.Offset, err)
	}
	var id [16]byte
	_, err = pgx.ForEachRow(rows, []any{&id}, func() error { fresh[id] = true; return nil })
	if err != nil {
		return nil, fmt.Errorf("record processed events %s/%d@%d: %w", first.Topic, first.Partition, first.Offset, err)
	}
	return fresh, nil
}

// handle calls the handler, turning a panic into a permanent error so one
// bad event cannot crash-loop the consumer; the stack goes into the error,
// and so into dead_letters.
func (r *Runner) handle(ctx context.Context, tx pgx.Tx, ev Event, out outbox.Emitter) (err error) {
	defer recoverHandler(&err)
	return r.cfg.Handler(ctx, tx, ev, out)
}

// handleBatch calls the BatchHandler with the new events of a batch.
func (r *Runner) handleBatch(ctx context.Context, tx pgx.Tx, evs []Event, out outbox.Emitter) (err error) {
	defer recoverHandler(&err)
	return r.cfg.BatchHandler(ctx, tx, evs, out)
}

// handleOne applies one event with whichever handler is configured; the
// careful path uses it to find the event a BatchHandler failed on.
func (r *Runner) handleOne(ctx context.Context, tx pgx.Tx, ev Event, out outbox.Emitter) error {
	if r.cfg.BatchHandler != nil {
		return r.handleBatch(ctx, tx, []Event{ev}, out)
	}
	return r.handle(ctx, tx, ev, out)
}

func recoverHandler(err *error) {
	if p := recover(); p != nil {
		*err = Permanent(fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack()))
	}
}

type headerJSON struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

const insertDeadLetter = `
INSERT INTO dead_letters (consumer_group, topic, partition, "offset", event_id, event_type,
    record_key, record_value, record_headers, reason, error, dlq_topic, failed_at)
VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''), $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (consumer_group, topic, partition, "offset") DO NOTHING`

// recordDeadLetter inserts the dead_letters row and returns the DLQ record
// to publish; fresh is false when this source position was dead-lettered
// before (a redelivery), in which case nothing is published again.
func (r *Runner) recordDeadLetter(ctx context.Context, tx pgx.Tx, dl deadLetter) (*kgo.Record, bool, error) {
	src := dl.d.rec
	now := time.Now().UTC()
	hs := make([]headerJSON, len(src.Headers))
	for i, h := range src.Headers {
		hs[i] = headerJSON{h.Key, h.Value}
	}
	hjson, err := json.Marshal(hs)
	if err != nil {
		return nil, false, err
	}
	eventID, eventType := dl.d.ev.EventID, dl.d.ev.EventType
	if eventID == "" { // poison: take what the headers say, for the operator
		eventID, eventType = headerValue(src, HeaderEventID), headerValue(src, HeaderEventType)
	}
	tag, err := tx.Exec(ctx, insertDeadLetter, r.cfg.Group, src.Topic, src.Partition, src.Offset, eventID, eventType,
		src.Key, src.Value, hjson, dl.reason, dl.err.Error(), r.cfg.DLQTopic, now)
	if err != nil {
		return nil, false, fmt.Errorf("record dead letter %s/%d@%d: %w", src.Topic, src.Partition, src.Offset, err)
	}
	r.cfg.Logger.WarnContext(eventContext(ctx, dl.d), "dead-lettering record", "group", r.cfg.Group, "topic", src.Topic, "partition", src.Partition,
		"offset", src.Offset, "event_id", eventID, "reason", dl.reason, "err", dl.err, "redelivery", tag.RowsAffected() == 0)
	if tag.RowsAffected() == 0 {
		return nil, false, nil
	}
	return dlqRecord(r.cfg.Group, r.cfg.DLQTopic, src, dl.reason, dl.err, now), true, nil
}

// eventErr wraps err with the record's position and event id.
func eventErr(d decoded, err error) error {
	return fmt.Errorf("%s/%d@%d event %s (%s): %w", d.rec.Topic, d.rec.Partition, d.rec.Offset, d.ev.EventID, d.ev.EventType, err)
}

// batchErr wraps a BatchHandler's error with the range of events it was
// given.
func batchErr(ds []decoded, err error) error {
	first, last := ds[0], ds[len(ds)-1]
	return fmt.Errorf("%s/%d@%d..%d %d events %s..%s: %w", first.rec.Topic, first.rec.Partition, first.rec.Offset,
		last.rec.Offset, len(ds), first.ev.EventID, last.ev.EventID, err)
}

// rollback rolls tx back when the function returns an error; after a
// commit it is a no-op.
func rollback(tx pgx.Tx, err *error) {
	if *err != nil {
		// The context may be the reason we failed: roll back regardless.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(ctx)
	}
}
