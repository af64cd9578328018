// Package avro encodes and decodes Concord events whose catalog entry says
// "encoding": "avro". The wire format is Confluent's: magic byte 0, the
// 4-byte big-endian schema id the registry gave the subject version, then
// the Avro binary body. The JSON envelope stays the canonical form: Encode
// takes the JSON an event would have, Decode gives it back, so validation,
// the outbox and logs keep working on JSON.
package avro

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"

	"github.com/linkedin/goavro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/concordhq/concord/schemas"
)

// ContentType is the content-type header of an Avro-encoded record value.
const ContentType = "application/vnd.apache.avro+binary"

// Errors callers branch on.
var (
	ErrNotAvro       = errors.New("not Confluent-framed Avro")
	ErrUnknownSchema = errors.New("unknown schema id")
)

// IDs tells the serde which registry schema id belongs to a version of an
// event type (see Register in cmd/schemactl, or sr.Client.SchemaByVersion).
type IDs func(eventType string, version int) (int, error)

// Serde encodes and decodes the Avro-encoded event types of a catalog. It
// is immutable after New and safe for concurrent use.
type Serde struct {
	byID  map[int]*codec
	byKey map[string]*codec // "type/vN"
}

type codec struct {
	id      int
	typ     string
	version int
	avro    *goavro.Codec
	schema  any // the parsed .avsc, to map JSON to Avro and back
	names   map[string]any
}

func key(typ string, v int) string { return typ + "/v" + strconv.Itoa(v) }

// New compiles the v<N>.avsc twin of every version of every Avro-encoded
// type in the catalog and asks ids for its schema id.
func New(cat *schemas.Catalog, ids IDs) (*Serde, error) {
	s := &Serde{byID: map[int]*codec{}, byKey: map[string]*codec{}}
	for _, typ := range cat.Types() {
		e, err := cat.Lookup(typ)
		if err != nil {
			return nil, err
		}
		if e.Encoding != schemas.EncodingAvro {
			continue
		}
		for _, v := range e.Versions {
			file := path.Join("events", typ, "v"+strconv.Itoa(v)+".avsc")
			b, err := fs.ReadFile(cat.Files(), file)
			if err != nil {
				return nil, fmt.Errorf("%s is Avro-encoded: %w", typ, err)
			}
			c, err := compile(b)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			id, err := ids(typ, v)
			if err != nil {
				return nil, fmt.Errorf("schema id of %s v%d: %w", typ, v, err)
			}
			c.id, c.typ, c.version = id, typ, v
			s.byID[id] = c
			s.byKey[key(typ, v)] = c
		}
	}
	return s, nil
}

func compile(avsc []byte) (*codec, error) {
	ac, err := goavro.NewCodec(string(avsc))
	if err != nil {
		return nil, fmt.Errorf("compile Avro schema: %w", err)
	}
	var schema any
	dec := json.NewDecoder(bytes.NewReader(avsc))
	dec.UseNumber()
	if err := dec.Decode(&schema); err != nil {
		return nil, err
	}
	c := &codec{avro: ac, schema: schema, names: map[string]any{}}
	collectNames(schema, "", c.names)
	return c, nil
}

// Encode turns a JSON envelope into a Confluent-framed Avro value using the
// schema of its event_type and event_version.
func (s *Serde) Encode(envelope []byte) ([]byte, error) {
	var head struct {
		EventID      string `json:"event_id"`
		EventType    string `json:"event_type"`
		EventVersion int    `json:"event_version"`
	}
	if err := json.Unmarshal(envelope, &head); err != nil {
		return nil, fmt.Errorf("encode Avro: read envelope: %w", err)
	}
	c, ok := s.byKey[key(head.EventType, head.EventVersion)]
	if !ok {
		return nil, fmt.Errorf("encode event %s: %s v%d is not Avro-encoded: %w", head.EventID, head.EventType, head.EventVersion, ErrUnknownSchema)
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(envelope))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("encode event %s: %w", head.EventID, err)
	}
	native, err := c.toNative(c.schema, doc, "")
	if err != nil {
		return nil, fmt.Errorf("encode event %s (%s v%d): %w", head.EventID, head.EventType, head.EventVersion, err)
	}
	var h sr.ConfluentHeader
	out, err := h.AppendEncode(nil, c.id, nil)
	if err != nil {
		return nil, err
	}
	out, err = c.avro.BinaryFromNative(out, native)
	if err != nil {
		return nil, fmt.Errorf("encode event %s (%s v%d): %w", head.EventID, head.EventType, head.EventVersion, err)
	}
	return out, nil
}

// Decode turns a Confluent-framed Avro value back into the JSON envelope.
func (s *Serde) Decode(value []byte) ([]byte, error) {
	if !IsAvro(value) {
		return nil, ErrNotAvro
	}
	var h sr.ConfluentHeader
	id, body, err := h.DecodeID(value)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAvro, err)
	}
	c, ok := s.byID[id]
	if !ok {
		return nil, fmt.Errorf("decode Avro: %w %d", ErrUnknownSchema, id)
	}
	native, rest, err := c.avro.NativeFromBinary(body)
	if err != nil {
		return nil, fmt.Errorf("decode Avro (%s v%d): %w", c.typ, c.version, err)
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("decode Avro (%s v%d): %d trailing bytes", c.typ, c.version, len(rest))
	}
	doc, err := c.fromNative(c.schema, native, "")
	if err != nil {
		return nil, fmt.Errorf("decode Avro (%s v%d): %w", c.typ, c.version, err)
	}
	return json.Marshal(doc)
}

// IsAvro reports whether a record value starts with Confluent's framing:
// the magic byte 0 and a 4-byte schema id. A JSON envelope starts with '{'.
func IsAvro(value []byte) bool { return len(value) >= 5 && value[0] == 0 }

// DecodeValue gives the JSON envelope of a record value whatever its
// encoding: Avro when the content type says so or the value carries the
// magic byte, JSON otherwise (returned as is).
func (s *Serde) DecodeValue(contentType string, value []byte) ([]byte, error) {
	if contentType == ContentType || (contentType != schemas.ContentTypeJSON && IsAvro(value)) {
		return s.Decode(value)
	}
	return value, nil
}
