package eventctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/avro"
)

// Record is a Kafka record as tail sees it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Time      time.Time
	Key       string
	Value     []byte
	Headers   map[string]string
}

// Event is a decoded record: its envelope, or why it could not be read.
type Event struct {
	Record   Record
	Envelope schemas.Envelope
	JSON     json.RawMessage // the envelope as JSON (decoded from Avro when it was)
	Err      error
}

// Codec reads and writes envelopes with the catalog. Avro is nil when no
// schema ids are known; Avro-framed records then fail to decode, naming
// the id.
type Codec struct {
	Catalog *schemas.Catalog
	Avro    *avro.Serde
	AvroIDs map[string]int // "type/vN" → registry schema id, the ones Avro knows
}

// Decode reads a record's envelope — Confluent-framed Avro when the
// content-type header or the magic byte says so, JSON otherwise — and
// checks it against the catalog: known type and version, valid payload.
func (c Codec) Decode(r Record) Event {
	ev := Event{Record: r}
	if len(r.Value) == 0 {
		ev.Err = errors.New("empty value")
		return ev
	}
	doc := r.Value
	ct := r.Headers[schemas.HeaderContentType]
	if ct == avro.ContentType || (ct != schemas.ContentTypeJSON && avro.IsAvro(r.Value)) {
		if c.Avro == nil {
			ev.Err = fmt.Errorf("Avro value with schema id %d, and no schema ids known (pass --registry or --avro-ids)", schemaID(r.Value))
			return ev
		}
		var err error
		if doc, err = c.Avro.Decode(r.Value); err != nil {
			ev.Err = err
			return ev
		}
	}
	env, err := schemas.DecodeEnvelope(doc)
	if err != nil {
		ev.Err = err
		return ev
	}
	ev.Envelope = env
	if err := c.Catalog.Validate(doc); err != nil {
		ev.Err = fmt.Errorf("invalid event: %w", err)
		return ev
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc); err != nil {
		ev.Err = fmt.Errorf("decode envelope: %w", err)
		return ev
	}
	ev.JSON = compact.Bytes()
	return ev
}

func schemaID(v []byte) int {
	if len(v) < 5 {
		return -1
	}
	return int(v[1])<<24 | int(v[2])<<16 | int(v[3])<<8 | int(v[4])
}

// Filter keeps the events of some types and of one key.
type Filter struct {
	Types map[string]bool // empty: every type
	Key   string          // empty: every key
}

// ParseTypes reads --type: comma-separated event types, each known to the
// catalog.
func ParseTypes(cat *schemas.Catalog, s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		if _, err := cat.Lookup(t); err != nil {
			return nil, fmt.Errorf("--type %q: %w (known: %s)", t, err, strings.Join(cat.Types(), ", "))
		}
		out[t] = true
	}
	return out, nil
}

// Keep says whether tail prints the event. A record that did not decode
// is kept unless its key or its event_type header rule it out: a broken
// record is news.
func (f Filter) Keep(ev Event) bool {
	if f.Key != "" && ev.Record.Key != f.Key {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	typ := ev.Envelope.EventType
	if typ == "" {
		typ = ev.Record.Headers[schemas.HeaderEventType]
	}
	if ev.Err != nil && typ == "" {
		return true
	}
	return f.Types[typ]
}

// Text is the readable line of an event: record time, topic/partition@offset,
// key, type vN, event id and the compact payload; or the error.
func Text(ev Event) string {
	r := ev.Record
	key := r.Key
	if key == "" {
		key = "-"
	}
	head := fmt.Sprintf("%s %s/%d@%d %s", r.Time.UTC().Format("2006-01-02T15:04:05.000Z"), r.Topic, r.Partition, r.Offset, key)
	if ev.Err != nil {
		return head + " ERROR " + oneLine(ev.Err.Error())
	}
	e := ev.Envelope
	var data bytes.Buffer
	if err := json.Compact(&data, e.Data); err != nil {
		data.Reset()
		data.Write(e.Data)
	}
	return fmt.Sprintf("%s %s v%d %s %s", head, e.EventType, e.EventVersion, e.EventID, data.String())
}

// jsonLine is the --format json form of an event.
type jsonLine struct {
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Offset    int64           `json:"offset"`
	Timestamp time.Time       `json:"timestamp"`
	Key       string          `json:"key"`
	Event     json.RawMessage `json:"event,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// JSON is the --format json line of an event: where it was and the
// envelope, or the error.
func JSON(ev Event) string {
	r := ev.Record
	l := jsonLine{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Time.UTC(), Key: r.Key, Event: ev.JSON}
	if ev.Err != nil {
		l.Event, l.Error = nil, ev.Err.Error()
	}
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	return string(b)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
