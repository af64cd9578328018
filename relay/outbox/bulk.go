package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/schemas"
)

// notifySQL wakes the relays; Postgres delivers it when the transaction
// commits, and folds repeated notifications of one transaction into one.
const notifySQL = "select pg_notify($1, '')"

// Queue is Append for a caller that sends its statements as one pgx.Batch:
// it validates ev and queues its insert and the relay's NOTIFY on b, so the
// event costs no round trip of its own. Send b in the transaction of the
// change the event reports.
func Queue(b *pgx.Batch, ev Event) (schemas.Envelope, error) {
	env, rec, err := Prepare(ev)
	if err != nil {
		return schemas.Envelope{}, err
	}
	b.Queue(insertSQL, rec.args()...)
	b.Queue(notifySQL, NotifyChannel)
	return env, nil
}

// Buffer collects events and writes them with one COPY. Append costs two
// round trips per event (the insert and the NOTIFY); a consumer batch whose
// events each emit one spends most of its time there.
//
// Add validates each event as Append does, so an invalid event fails where
// it is made. Rows keep their Add order, and with it the relay's per-key
// order. A Buffer is not safe for concurrent use.
type Buffer struct {
	recs []Record
}

// Add validates ev and keeps its row for Flush.
func (b *Buffer) Add(ev Event) (schemas.Envelope, error) {
	env, rec, err := Prepare(ev)
	if err != nil {
		return schemas.Envelope{}, err
	}
	b.recs = append(b.recs, rec)
	return env, nil
}

// Flush writes the kept rows with tx and notifies the relays (on commit),
// then empties the buffer. Call it in the transaction of the change the
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
	if _, err := tx.Exec(ctx, notifySQL, NotifyChannel); err != nil {
		return fmt.Errorf("outbox notify after %d events: %w", len(rows), err)
	}
	b.recs = b.recs[:0]
	return nil
}
