package avro_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"reflect"
	"testing"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/avro"
)

// fixedIDs numbers the Avro subjects' versions as a registry would: every
// type and version its own id, since several Avro types share a topic.
func fixedIDs(typ string, v int) (int, error) {
	for i, t := range schemas.MustDefault().Types() {
		if t == typ {
			return 100*(i+1) + v, nil
		}
	}
	return 0, fmt.Errorf("no type %s", typ)
}

func avroTypes(t *testing.T, cat *schemas.Catalog) []schemas.Entry {
	t.Helper()
	var out []schemas.Entry
	for _, typ := range cat.Types() {
		e, _ := cat.Lookup(typ)
		if e.Encoding == schemas.EncodingAvro {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		t.Fatal("the catalog has no Avro-encoded type")
	}
	return out
}

func TestEveryAvroExampleRoundTripsJSONToAvroToJSON(t *testing.T) {
	cat := schemas.MustDefault()
	s, err := avro.New(cat, fixedIDs)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range avroTypes(t, cat) {
		examples, _ := fs.Glob(cat.Files(), path.Join("events", e.Type, "examples", "*.json"))
		for _, file := range examples {
			in, _ := fs.ReadFile(cat.Files(), file)
			wire, err := s.Encode(in)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var head struct {
				EventVersion int `json:"event_version"`
			}
			_ = json.Unmarshal(in, &head)
			id, _ := fixedIDs(e.Type, head.EventVersion)
			if wire[0] != 0 || int(binary.BigEndian.Uint32(wire[1:5])) != id {
				t.Errorf("%s: wire header % x, want magic 0 and id %d", file, wire[:5], id)
			}
			out, err := s.DecodeValue(avro.ContentType, wire)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if !sameJSON(t, in, out) {
				t.Errorf("%s: round trip changed the event\n in: %s\nout: %s", file, in, out)
			}
			if err := cat.Validate(out); err != nil {
				t.Errorf("%s: decoded event no longer validates: %v", file, err)
			}
			n++
		}
	}
	if n < 2 {
		t.Fatalf("round-tripped %d examples, want at least 2", n)
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if err := da.Decode(&x); err != nil {
		t.Fatal(err)
	}
	if err := db.Decode(&y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func TestDecodeValuePassesJSONThroughByContentTypeAndMagicByte(t *testing.T) {
	s, err := avro.New(schemas.MustDefault(), fixedIDs)
	if err != nil {
		t.Fatal(err)
	}
	js := []byte(`{"event_type":"order.created"}`)
	for _, ct := range []string{schemas.ContentTypeJSON, ""} {
		out, err := s.DecodeValue(ct, js)
		if err != nil || !bytes.Equal(out, js) {
			t.Errorf("content type %q: got %s, %v; want the JSON unchanged", ct, out, err)
		}
	}
}

func TestDecodeRejectsUnknownIDsAndUnframedValues(t *testing.T) {
	s, err := avro.New(schemas.MustDefault(), fixedIDs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decode([]byte{0, 0, 0, 0, 7, 2}); !errors.Is(err, avro.ErrUnknownSchema) {
		t.Errorf("unknown id: err = %v, want ErrUnknownSchema", err)
	}
	if _, err := s.Decode([]byte(`{"a":1}`)); !errors.Is(err, avro.ErrNotAvro) {
		t.Errorf("JSON value: err = %v, want ErrNotAvro", err)
	}
}

func TestEncodeRejectsEventsTheAvroSchemaCannotHold(t *testing.T) {
	s, err := avro.New(schemas.MustDefault(), fixedIDs)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := fs.ReadFile(schemas.MustDefault().Files(), "events/account.debited/examples/v1-basic.json")
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for name, edit := range map[string]func(){
		"extra field":     func() { m["data"].(map[string]any)["memo"] = "x" },
		"missing field":   func() { delete(m["data"].(map[string]any), "amount") },
		"wrong type":      func() { m["data"].(map[string]any)["amount"] = "12" },
		"json event type": func() { m["event_type"] = "order.created" },
	} {
		_ = json.Unmarshal(b, &m)
		edit()
		in, _ := json.Marshal(m)
		if _, err := s.Encode(in); err == nil {
			t.Errorf("%s: encoded %s", name, in)
		}
	}
}

func TestNewFailsWithoutASchemaID(t *testing.T) {
	_, err := avro.New(schemas.MustDefault(), func(string, int) (int, error) { return 0, fmt.Errorf("registry down") })
	if err == nil {
		t.Fatal("New succeeded without schema ids")
	}
}
