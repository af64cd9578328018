package eventctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/avro"
)

// Message is a record produce appends.
type Message struct {
	Topic   string
	Key     string
	Value   []byte
	Headers map[string]string
	Type    string
	Version int
	EventID string
}

// ReadEvents reads one JSON envelope or several (concatenated or one per
// line) from r.
func ReadEvents(r io.Reader) ([]json.RawMessage, error) {
	dec := json.NewDecoder(r)
	var out []json.RawMessage
	for i := 1; ; i++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("event %d: not JSON: %w", i, err)
		}
		out = append(out, raw)
	}
	if len(out) == 0 {
		return nil, errors.New("no event in the input")
	}
	return out, nil
}

// Prepare checks an envelope against the catalog — type known, version
// known, payload valid, an error naming the field otherwise — and builds
// its record: the catalog's topic (after prefix), keyed by the type's
// partition key, encoded as the catalog says (Avro needs schema ids).
// With fresh, the event gets a new event_id and the timestamp now, so a
// file can be produced again without consumers deduplicating it away.
func (c Codec) Prepare(envelope []byte, prefix string, fresh bool, now time.Time) (Message, error) {
	env, err := schemas.DecodeEnvelope(envelope)
	if err != nil {
		return Message{}, err
	}
	if fresh {
		env.EventID, env.Timestamp = schemas.NewEventID(), now
		if envelope, err = env.Marshal(); err != nil {
			return Message{}, err
		}
	}
	if err := c.Catalog.Validate(envelope); err != nil {
		return Message{}, err
	}
	e, err := c.Catalog.Lookup(env.EventType)
	if err != nil {
		return Message{}, err
	}
	key, err := e.PartitionKey(env.Data)
	if err != nil {
		return Message{}, err
	}
	m := Message{Topic: prefix + e.Topic, Key: key, Type: e.Type, Version: env.EventVersion, EventID: env.EventID,
		Headers: map[string]string{
			schemas.HeaderEventID: env.EventID, schemas.HeaderEventType: env.EventType,
			schemas.HeaderEventVersion: strconv.Itoa(env.EventVersion), schemas.HeaderContentType: schemas.ContentTypeJSON,
		}}
	if e.Encoding == schemas.EncodingAvro {
		if _, ok := c.AvroIDs[e.Type+"/v"+strconv.Itoa(env.EventVersion)]; c.Avro == nil || !ok {
			return Message{}, fmt.Errorf("%s v%d is Avro-encoded: pass --registry or --avro-ids %s/v%d=ID for its schema id",
				e.Type, env.EventVersion, e.Type, env.EventVersion)
		}
		if m.Value, err = c.Avro.Encode(envelope); err != nil {
			return Message{}, err
		}
		m.Headers[schemas.HeaderContentType] = avro.ContentType
		return m, nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, envelope); err != nil {
		return Message{}, err
	}
	m.Value = compact.Bytes()
	return m, nil
}
