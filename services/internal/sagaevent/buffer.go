package sagaevent

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
)

type bufferKey struct{}

// WithBuffer returns a context under which Append collects events in the
// returned outbox.Buffer instead of writing each one. Flush it in the same
// transaction before commit, or the events are lost with their business
// change kept.
func WithBuffer(ctx context.Context) (context.Context, *outbox.Buffer) {
	b := &outbox.Buffer{}
	return context.WithValue(ctx, bufferKey{}, b), b
}

// BatchHandler applies a consumer batch with mux's handlers, in offset
// order, buffering the events they append and writing them at the end
// (see Buffer). It is the default of a service whose handlers need nothing
// set-based; the saga's services each have their own.
//
// The runner redoes a batch one event at a time after a permanent failure;
// each of those calls has its own buffer, so a dead-lettered event's
// appends go with it.
func BatchHandler(mux idempotent.Mux) idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error {
		ctx, buf := WithBuffer(ctx)
		for _, ev := range evs {
			if err := mux.Handle(ctx, tx, ev); err != nil {
				return fmt.Errorf("event %s (%s): %w", ev.EventID, ev.EventType, err)
			}
		}
		return buf.Flush(ctx, tx)
	}
}
