package idempotent

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/schemas"
)

// decoded is one record of a batch after decoding: either an event with its
// parsed id, or the reason it is poison.
type decoded struct {
	rec     *kgo.Record
	ev      Event
	id      uuid.UUID
	reason  string // non-empty: poison, dead-letter with err
	err     error
	ignored bool // a type the handler does not act on (Config.Types)
}

// decodeRecord validates a record's value against the catalog and decodes
// its envelope. It never touches the database or the broker, so a poison
// record is found before any transaction starts.
// handles, when not nil, is the set of types the handler acts on; a
// record of another type is returned ignored, unvalidated.
func decodeRecord(cat *schemas.Catalog, handles map[string]bool, rec *kgo.Record) decoded {
	d := decoded{rec: rec}
	fail := func(reason string, err error) decoded {
		d.reason = reason
		d.err = fmt.Errorf("%s/%d@%d: %w", rec.Topic, rec.Partition, rec.Offset, err)
		return d
	}
	// Decode first, then validate against the schema the envelope names:
	// two passes over the bytes instead of Catalog.Validate's two plus a
	// third to decode, which matters at tens of thousands of events/s.
	env, err := decodeEnvelope(rec.Value)
	if err != nil {
		return fail(ReasonDecode, err)
	}
	if handles != nil && !handles[env.EventType] {
		// A type the catalog knows but this handler does not act on is
		// acknowledged; one the catalog does not know is nobody's event
		// (a typo, a forged record, a producer ahead of this binary) and
		// goes to the dead letters with its reason, not into silence.
		if _, err := cat.Lookup(env.EventType); err != nil {
			d.ev.Envelope = env // its id and type, for the operator
			return fail(ReasonUnknownType, err)
		}
		d.ignored = true
		return d
	}
	if err := cat.ValidateAs(env.EventType, env.EventVersion, rec.Value); err != nil {
		return fail(decodeReason(err), err)
	}
	id, err := uuid.Parse(env.EventID)
	if err != nil {
		return fail(ReasonDecode, fmt.Errorf("event_id %q: %w", env.EventID, err))
	}
	d.id = id
	d.ev = Event{
		Envelope:  env,
		Topic:     rec.Topic,
		Partition: rec.Partition,
		Offset:    rec.Offset,
		Key:       rec.Key,
		Headers:   make(map[string]string, len(rec.Headers)),
	}
	for _, h := range rec.Headers {
		d.ev.Headers[h.Key] = string(h.Value)
	}
	return d
}
