package sagaevent

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

type bufferKey struct{}

// Buffer holds the events appended under its context until Flush writes
// them to the outbox in one COPY. outbox.Append costs two round trips per
// event (the insert and the relay's NOTIFY); a consumer batch of a
// hundred events that each emit one spent most of its time there.
//
// Events are validated when appended, as outbox.Append does, so an
// invalid event still fails its own handler. Rows keep their append order,
// and with it the relay's per-key order.
type Buffer struct {
	recs []outbox.Record
}

// WithBuffer returns a context under which Append buffers into the
// returned Buffer instead of writing. Flush it in the same transaction
// before commit, or the events are lost with their business change kept.
func WithBuffer(ctx context.Context) (context.Context, *Buffer) {
	b := &Buffer{}
	return context.WithValue(ctx, bufferKey{}, b), b
}

func (b *Buffer) add(ev outbox.Event) (schemas.Envelope, error) {
	env, rec, err := outbox.Prepare(ev)
	if err != nil {
		return schemas.Envelope{}, err
	}
	b.recs = append(b.recs, rec)
	return env, nil
}

// Flush writes the buffered events with tx and notifies the relay (on
// commit), then empties the buffer.
func (b *Buffer) Flush(ctx context.Context, tx pgx.Tx) error {
	if len(b.recs) == 0 {
		return nil
	}
	rows := make([][]any, len(b.recs))
	for i, r := range b.recs {
		rows[i] = r.Values()
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"outbox"}, outbox.Columns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("outbox: copy %d events (first %s %s): %w", len(rows), b.recs[0].EventType, b.recs[0].EventID, err)
	}
	if _, err := tx.Exec(ctx, "select pg_notify($1, '')", outbox.NotifyChannel); err != nil {
		return fmt.Errorf("outbox notify after %d events: %w", len(rows), err)
	}
	b.recs = b.recs[:0]
	return nil
}

// BatchHandler applies a consumer batch with mux's handlers, in offset
// order, buffering the events they append and writing them at the end
// (see Buffer). before, when not nil, runs first with the whole batch
// (inventory locks the stock rows the batch will touch).
//
// The runner redoes a batch one event at a time after a permanent failure;
// each of those calls has its own buffer, so a dead-lettered event's
// appends go with it.
func BatchHandler(mux idempotent.Mux, before func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error) idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error {
		if before != nil {
			if err := before(ctx, tx, evs); err != nil {
				return err
			}
		}
		ctx, buf := WithBuffer(ctx)
		for _, ev := range evs {
			if err := mux.Handle(ctx, tx, ev); err != nil {
				return fmt.Errorf("event %s (%s): %w", ev.EventID, ev.EventType, err)
			}
		}
		return buf.Flush(ctx, tx)
	}
}
