package idempotent

import (
	"context"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/schemas"
)

// Event is one decoded, schema-valid record handed to a Handler.
type Event struct {
	schemas.Envelope
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Headers   map[string]string
}

// Handler applies one event's effect inside tx. The runner calls it only for
// events this group has not processed before, and commits tx together with
// the dedupe row, so the handler must write through tx only.
//
// A returned error is transient (the batch is retried, nothing is skipped)
// unless it is wrapped with Permanent or is a PostgreSQL data or integrity
// error (see Classify), in which case the record is dead-lettered and the
// partition goes on. The handler runs inside a savepoint when it fails, so a
// failed handler leaves no partial effect behind.
type Handler func(ctx context.Context, tx pgx.Tx, ev Event) error

// BatchHandler applies the effects of several events at once inside tx: the
// events of one polled batch that this group has not processed before, in
// offset order. It is the set-based alternative to Handler (set one or the
// other in Config): a handler that queues its statements on one pgx.Batch,
// or writes them with one INSERT … SELECT FROM unnest(…) or COPY, makes one
// round trip per batch instead of one per event.
//
// The contract is Handler's: write through tx only; a returned error is
// transient unless Classify calls it permanent. A permanent error does not
// say which event caused it, so the runner rolls the whole transaction back
// and redoes the batch calling the BatchHandler with one event at a time,
// each in its own savepoint; only the events that fail alone are
// dead-lettered. The handler must therefore give the same outcome for an
// event whether it sees it alone or among others.
type BatchHandler func(ctx context.Context, tx pgx.Tx, evs []Event) error

// Mux routes events to handlers by event_type. Types it has no handler for
// are recorded as processed and skipped: a consumer of a shared topic ignores
// the types it does not care about, and that is not a poison record.
type Mux map[string]Handler

// Handle calls the handler registered for ev.EventType, if any.
func (m Mux) Handle(ctx context.Context, tx pgx.Tx, ev Event) error {
	h, ok := m[ev.EventType]
	if !ok {
		return nil
	}
	return h(ctx, tx, ev)
}

// Types lists the event types m handles, sorted: Config.Types for a
// runner whose BatchHandler acts on the same types.
func (m Mux) Types() []string {
	return slices.Sorted(maps.Keys(m))
}
