package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/schemas"
)

// notifySQL wakes every worker of the relays (an empty payload names no
// shard: see NotifyChannel), for writes of rows of any keys; Postgres
// delivers it when the transaction commits, and folds repeated
// notifications of one transaction into one.
const notifySQL = "select pg_notify($1, '')"

// Queue is Append for a caller that sends its statements as one pgx.Batch:
// it validates ev and queues its insert and the relay's NOTIFY (one
// statement) on b, so the event costs no round trip of its own. Send b in
// the transaction of the change the event reports. Queue has no context to
// take a trace from: pass Traced(ctx, ev) for the event to carry the
// caller's.
func (w Writer) Queue(b *pgx.Batch, ev Event) (schemas.Envelope, error) {
	env, rec, err := w.Prepare(ev)
	if err != nil {
		return schemas.Envelope{}, err
	}
	sql, args := w.insert(rec)
	b.Queue(sql, args...)
	return env, nil
}

// Emitter is what a unit of work emits its events through: a consumer's
// handler gets one from the runner (idempotent.Runner), which writes what
// was emitted in the handler's transaction before it commits, so no event
// can be forgotten while the change it reports commits.
type Emitter interface {
	// Emit validates ev (an invalid event is an error wrapping
	// ErrInvalidEvent: return it, the change rolls back) and keeps it for
	// the transaction.
	Emit(ev Event) (schemas.Envelope, error)
}

// Buffer collects events and writes them with one COPY; it is the Emitter
// a consumer runner hands its handlers. Append costs two
// round trips per event (the insert and the NOTIFY); a consumer batch whose
// events each emit one spends most of its time there.
//
// Emit validates each event as Append does, so an invalid event fails where
// it is made. Rows keep their Emit order, and with it the relay's per-key
// order. A Buffer is not safe for concurrent use.
type Buffer struct {
	w    Writer
	recs []Record
}

// NewBuffer returns an empty Buffer whose events w routes.
func (w Writer) NewBuffer() *Buffer { return &Buffer{w: w} }

// Len is the number of events kept for Flush.
func (b *Buffer) Len() int { return len(b.recs) }

// Emit validates ev and keeps its row for Flush.
func (b *Buffer) Emit(ev Event) (schemas.Envelope, error) {
	env, rec, err := b.w.Prepare(ev)
	if err != nil {
		return schemas.Envelope{}, err
	}
	b.recs = append(b.recs, rec)
	return env, nil
}

// Flush writes the kept rows with tx and notifies the relays (on commit;
// not with the Writer's NoWake), then empties the buffer. Call it in the transaction of the change the
// events report, before commit, or the events are lost with the change kept.
func (b *Buffer) Flush(ctx context.Context, tx pgx.Tx) error {
	if len(b.recs) == 0 {
		return nil
	}
	rows := make([][]any, len(b.recs))
	for i, r := range b.recs {
		rows[i] = r.args()
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"outbox"}, Columns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("outbox: copy %d events (first %s %s): %w", len(rows), b.recs[0].EventType, b.recs[0].EventID, err)
	}
	if !b.w.NoWake {
		if _, err := tx.Exec(ctx, notifySQL, NotifyChannel); err != nil {
			return fmt.Errorf("outbox notify after %d events: %w", len(rows), err)
		}
	}
	b.recs = b.recs[:0]
	return nil
}

// Emitting calls fn with an Emitter and writes what fn emitted in tx when
// fn returns nil: code outside a consumer's runner (a sweeper, a test) gets
// what the runner gives handlers, and cannot forget the flush. The events
// carry the trace of ctx's span (see Traced).
func (w Writer) Emitting(ctx context.Context, tx pgx.Tx, fn func(out Emitter) error) error {
	b := w.NewBuffer()
	if err := fn(TracedEmitter(ctx, b)); err != nil {
		return err
	}
	return b.Flush(ctx, tx)
}
