// Package contract is the typed face of the event catalog: one constant per
// event type, one struct per (type, version) with the fields its schema
// declares, and Decode, which turns a received envelope into the struct for
// the version a handler reads.
//
// The types are generated from schemas/events (catalog.json and the
// versioned schemas) by contractgen; edit a schema, run
// `go generate ./schemas/...`, and the compiler shows every producer and
// handler the change touches. `make lint` fails when the generated file is
// stale.
//
// A payload knows its event type, version and partition key, so appending
// one (relay/outbox) needs no strings:
//
//	outbox.Append(ctx, tx, outbox.Event{Payload: contract.OrderCancelledV1{OrderID: id, Reason: "out_of_stock"}})
package contract

//go:generate go run ../internal/contractgen -out contract_gen.go

import (
	"errors"
	"fmt"

	// Decodes as encoding/json does, about three times faster: every
	// handler decodes every event it takes (TestDecodeAgreesWithEncodingJSON).
	"github.com/segmentio/encoding/json"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/compat"
)

// Type is an event type of the catalog, e.g. TypeOrderCreated.
type Type string

// entry is what the catalog says of a type, copied at generation time.
type entry struct {
	topic, aggregateType, keyField, encoding, compatibility string
	latest                                                  int
}

// Topic is the catalog topic events of t go to (before any prefix).
func (t Type) Topic() string { return entries[t].topic }

// AggregateType is the aggregate events of t belong to.
func (t Type) AggregateType() string { return entries[t].aggregateType }

// Latest is the newest version of t.
func (t Type) Latest() int { return entries[t].latest }

// Known reports whether t is a type of the catalog.
func (t Type) Known() bool { _, ok := entries[t]; return ok }

// String is the type as it travels in envelopes and headers.
func (t Type) String() string { return string(t) }

// Payload is the data of one event: a generated struct of this package.
type Payload interface {
	EventType() Type
	EventVersion() int
	// PartitionKey is the value of the catalog's key field: the aggregate
	// whose events must stay in order.
	PartitionKey() string
}

// ErrMismatch is returned by Decode for an envelope T cannot read: another
// event type, or a version T's schema is not compatible with.
var ErrMismatch = errors.New("event does not match the payload type")

// Decode decodes the data of env into T, the generated struct of the
// version the caller reads. It checks env is T's event type and that T can
// read env's version: the same version always; under BACKWARD compatibility
// (the catalog's default: a new schema reads old data) an older one; under
// FORWARD an newer one; under FULL either. So a v2 reader of order.created
// reads v1 events (fields added in v2 stay zero), and a v1 reader reads v1.
//
// Decode does not validate against the schema: the consumer's runner did
// that before the handler runs.
func Decode[T Payload](env schemas.Envelope) (T, error) {
	var p T
	if string(p.EventType()) != env.EventType {
		return p, fmt.Errorf("%w: event %s is %s, not %s", ErrMismatch, env.EventID, env.EventType, p.EventType())
	}
	if !CanRead(p.EventType(), p.EventVersion(), env.EventVersion) {
		return p, fmt.Errorf("%w: event %s is %s v%d, which a v%d reader cannot read (%s)",
			ErrMismatch, env.EventID, env.EventType, env.EventVersion, p.EventVersion(), entries[p.EventType()].compatibility)
	}
	if err := json.Unmarshal(env.Data, &p); err != nil {
		return p, fmt.Errorf("event %s (%s v%d): decode data: %w", env.EventID, env.EventType, env.EventVersion, err)
	}
	return p, nil
}

// CanRead reports whether a reader of version reader of t can read data
// written as version written, under t's compatibility mode (compat.Mode's
// promises: BACKWARD, new reads old; FORWARD, old reads new; FULL, both;
// the previous version only, or every one when transitive).
func CanRead(t Type, reader, written int) bool {
	if reader == written {
		return true
	}
	m := compat.Mode(entries[t].compatibility)
	if d := reader - written; d != 1 && d != -1 && !m.Transitive() {
		return false
	}
	if written < reader {
		return m.PromisesBackward()
	}
	return m.PromisesForward()
}
