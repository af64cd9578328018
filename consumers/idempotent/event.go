package idempotent

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
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

// Type is the event's type as the contract names it.
func (e Event) Type() contract.Type { return contract.Type(e.EventType) }

// Decode decodes ev's data into T, the generated payload of the version
// the caller reads (see contract.Decode). An event T cannot read is a
// permanent failure of that event: it is dead-lettered, not retried.
func Decode[T contract.Payload](ev Event) (T, error) {
	d, err := contract.Decode[T](ev.Envelope)
	if err != nil {
		return d, Permanent(err)
	}
	return d, nil
}

// Handler applies one event's effect inside tx and emits the events that
// effect causes through out. The runner calls it only for events this group
// has not processed before, writes what it emitted to the outbox in tx, and
// commits tx together with the dedupe row, so the handler must write through
// tx only and cannot lose an event it emitted.
//
// A returned error is transient (the batch is retried, nothing is skipped)
// unless it is wrapped with Permanent or is a PostgreSQL data or integrity
// error (see Classify), in which case the record is dead-lettered and the
// partition goes on. The handler runs inside a savepoint when it fails, so a
// failed handler leaves no partial effect (and no emitted event) behind.
type Handler func(ctx context.Context, tx pgx.Tx, ev Event, out outbox.Emitter) error

// BatchHandler applies the effects of several events at once inside tx: the
// events of one polled batch that this group has not processed before, in
// offset order (with Config.JoinPartitions, the batches of several
// partitions one after another, each in offset order). It is the set-based alternative to Handler (set one or the
// other in Config): a handler that queues its statements on one pgx.Batch,
// or writes them with one INSERT … SELECT FROM unnest(…) or COPY, makes one
// round trip per batch instead of one per event. What it emits through out
// is written with one COPY before the commit.
//
// The contract is Handler's: write through tx only; a returned error is
// transient unless Classify calls it permanent. A permanent error does not
// say which event caused it, so the runner rolls the whole transaction back
// and redoes the batch calling the BatchHandler with one event at a time,
// each in its own savepoint with its own emitter; only the events that fail
// alone are dead-lettered. The handler must therefore give the same outcome
// for an event whether it sees it alone or among others.
type BatchHandler func(ctx context.Context, tx pgx.Tx, evs []Event, out outbox.Emitter) error

// TypedHandler applies one event whose data was decoded into T.
type TypedHandler[T contract.Payload] func(ctx context.Context, tx pgx.Tx, ev Event, data T, out outbox.Emitter) error

// Mux routes events to typed handlers by event type and version; its Handle
// method is a Handler. Types it has no handler for are left alone (a
// consumer of a shared topic ignores what it does not care about; set
// Config.Types to Mux.Types so the runner does not even record them). An
// event of a handled type in a version no registered handler can read is a
// permanent failure of that event.
type Mux struct {
	routes map[contract.Type][]route
}

type route struct {
	version int
	h       Handler
}

// Handle registers h for the events of T's type that T can read: T's
// version, and the versions its compatibility mode lets T read
// (contract.CanRead). A handler registered for the exact version of an
// event wins over one that reads it by compatibility.
func Handle[T contract.Payload](m *Mux, h TypedHandler[T]) {
	var zero T
	if m.routes == nil {
		m.routes = map[contract.Type][]route{}
	}
	m.routes[zero.EventType()] = append(m.routes[zero.EventType()], route{version: zero.EventVersion(),
		h: func(ctx context.Context, tx pgx.Tx, ev Event, out outbox.Emitter) error {
			d, err := Decode[T](ev)
			if err != nil {
				return err
			}
			return h(ctx, tx, ev, d, out)
		}})
}

// Handle calls the handler registered for ev's type that reads its version.
func (m *Mux) Handle(ctx context.Context, tx pgx.Tx, ev Event, out outbox.Emitter) error {
	routes, ok := m.routes[ev.Type()]
	if !ok {
		return nil
	}
	var reader *route
	for i, r := range routes {
		if r.version == ev.EventVersion {
			reader = &routes[i]
			break
		}
		if reader == nil && contract.CanRead(ev.Type(), r.version, ev.EventVersion) {
			reader = &routes[i]
		}
	}
	if reader == nil {
		return Permanent(fmt.Errorf("%w: event %s is %s v%d; no handler reads that version", contract.ErrMismatch, ev.EventID, ev.EventType, ev.EventVersion))
	}
	return reader.h(ctx, tx, ev, out)
}

// Types lists the event types m handles, sorted: Config.Types for a
// runner whose handler acts on the same types.
func (m *Mux) Types() []contract.Type {
	return slices.Sorted(maps.Keys(m.routes))
}

// Collect is a BatchHandler for a set-based store: read turns each event
// into the item the store applies (ok false: a type the handler does not
// act on; an error names the event and fails the batch), and apply writes
// the items of the batch at once, emitting through out. A batch with no
// items costs nothing.
func Collect[T any](read func(Event) (item T, ok bool, err error), apply func(ctx context.Context, tx pgx.Tx, out outbox.Emitter, items []T) error) BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []Event, out outbox.Emitter) error {
		items := make([]T, 0, len(evs))
		for _, ev := range evs {
			it, ok, err := read(ev)
			if err != nil {
				return err
			}
			if ok {
				items = append(items, it)
			}
		}
		if len(items) == 0 {
			return nil
		}
		return apply(ctx, tx, out, items)
	}
}

// One is h as a per-event Handler: the batch of one event, which a
// BatchHandler must treat as it would the event among others.
func (h BatchHandler) One() Handler {
	return func(ctx context.Context, tx pgx.Tx, ev Event, out outbox.Emitter) error {
		return h(ctx, tx, []Event{ev}, out)
	}
}
