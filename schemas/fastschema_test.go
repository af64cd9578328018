package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// FuzzFastPathAcceptsOnlyWhatJSONSchemaAccepts holds ValidateAs's fast
// path (parseFast, then fastSchema) to jsonschema: for every schema of the
// catalog, an event the fast path accepts must pass jsonschema's
// validation of what encoding/json decodes, so skipping jsonschema never
// lets an invalid event through. fastSchema alone is held to the same on
// encoding/json's value, and for the schema an event names ValidateAs
// must give the error the slow path alone gives.
//
// The event is the fuzzer's bytes and, when value is JSON, every variant
// of it eachChange makes: value in place of each value of the event in
// turn, each value removed, or value added to each object (as member
// name) and array, as op says. Byte mutations of an envelope mostly stop
// at the parser or at event_type's const; the variants are valid
// envelopes but for one value, and reach every rule of the schemas.
func FuzzFastPathAcceptsOnlyWhatJSONSchemaAccepts(f *testing.F) {
	for _, ev := range exampleEvents(f) {
		f.Add(ev, uint8(0), "", []byte(nil))
		f.Add(ev, uint8(1), "", []byte(`0`)) // each value removed
		for _, v := range []string{`"x"`, `""`, `"` + strings.Repeat("x", 65) + `"`, `"EURO"`, `"0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d0"`,
			`"2026-11-29T12:00:00"`, `0`, `-1`, `1.0`, `1.5`, `1e2`, `99999999999999999999`, `true`, `null`, `{}`, `[]`, `[{}]`} {
			f.Add(ev, uint8(0), "", []byte(v))
			f.Add(ev, uint8(2), "reason", []byte(v))
		}
	}
	cat := MustDefault()
	ids := make([]schemaID, 0, len(cat.schemas))
	for id := range cat.schemas {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		return ids[i].typ < ids[j].typ || ids[i].typ == ids[j].typ && ids[i].v < ids[j].v
	})
	// fastSchemaAlone checks fastSchema on encoding/json's value.
	fastSchemaAlone := func(t *testing.T, event []byte, jsonDoc any) {
		for _, id := range ids {
			s := cat.schemas[id]
			if s.fast != nil && s.fast.accepts(jsonDoc) {
				if err := s.validate(id.typ, id.v, jsonDoc); err != nil {
					t.Fatalf("%s v%d: fastSchema accepted encoding/json's value, which jsonschema rejects (%v):\n%s", id.typ, id.v, err, event)
				}
			}
		}
	}
	// encodedAlone checks acceptsEncoded, which must accept only what
	// parseFast decodes into a value fastSchema accepts, and so only what
	// jsonschema accepts.
	encodedAlone := func(t *testing.T, id schemaID, event []byte) {
		s := cat.schemas[id]
		if s.fast == nil || !s.fast.acceptsEncoded(event) {
			return
		}
		if doc, parsed := parseFast(event); !parsed || !s.fast.accepts(doc) {
			t.Fatalf("%s v%d: acceptsEncoded accepted what parseFast and fastSchema do not (parsed %v):\n%s", id.typ, id.v, parsed, event)
		}
		if err := cat.validateSlow(id.typ, id.v, event); err != nil {
			t.Fatalf("%s v%d: acceptsEncoded accepted what jsonschema rejects (%v):\n%s", id.typ, id.v, err, event)
		}
	}
	f.Fuzz(func(t *testing.T, event []byte, op uint8, name string, value []byte) {
		jsonDoc, jsonErr := decodeStrict(event)
		for _, id := range ids {
			if _, _, accepted := cat.schemas[id].acceptsFast(event); accepted {
				if err := cat.validateSlow(id.typ, id.v, event); err != nil {
					t.Fatalf("%s v%d: the fast path accepted what jsonschema rejects (%v):\n%s", id.typ, id.v, err, event)
				}
			}
			encodedAlone(t, id, event)
			if jsonErr == nil && names(jsonDoc, id) {
				got, want := cat.ValidateAs(id.typ, id.v, event), cat.validateSlow(id.typ, id.v, event)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s v%d: ValidateAs says %v, the slow path alone %v:\n%s", id.typ, id.v, got, want, event)
				}
			}
		}
		if jsonErr != nil {
			return
		}
		fastSchemaAlone(t, event, jsonDoc)
		// The variants: acceptsFast is parseFast and fastSchema, run
		// here with one parse for all schemas (acceptsFast parses once
		// per call, which made the variants too slow to fuzz).
		eachChange(jsonDoc, op, name, value, func(changed []byte) {
			changedDoc, err := decodeStrict(changed)
			if err != nil {
				t.Fatalf("a variant is not JSON: %v\n%s", err, changed)
			}
			fastSchemaAlone(t, changed, changedDoc)
			for _, id := range ids {
				encodedAlone(t, id, changed)
			}
			doc, parsed := parseFast(changed)
			if !parsed {
				return
			}
			for _, id := range ids {
				if s := cat.schemas[id]; s.fast != nil && s.fast.accepts(doc) {
					if err := cat.validateSlow(id.typ, id.v, changed); err != nil {
						t.Fatalf("%s v%d: the fast path accepted what jsonschema rejects (%v):\n%s", id.typ, id.v, err, changed)
					}
				}
			}
		})
	})
}

// names reports whether doc is an event naming schema id: its event_type
// and event_version as written.
func names(doc any, id schemaID) bool {
	m, _ := doc.(map[string]any)
	return m["event_type"] == id.typ && m["event_version"] == json.Number(strconv.Itoa(id.v))
}

// eachChange calls yield with the JSON encoding of doc (a value decoded
// with UseNumber) changed at each of its values in turn, depth first and
// object members by name: op%3 is 0 to put value in its place, 1 to remove
// it (the root excepted), 2 to add value to it when it is an object (as
// member name) or an array. It makes no change when value is not JSON.
// doc is changed while yield runs and restored after.
func eachChange(doc any, op uint8, name string, value []byte, yield func([]byte)) {
	if !json.Valid(value) {
		return
	}
	raw := json.RawMessage(value)
	// A place is a value of the tree with the ways to change it there;
	// each returns the undo.
	type place struct {
		v      any
		set    func(any) (undo func())
		remove func() (undo func())
	}
	var places []place
	var walk func(v any, set func(any) func(), remove func() func())
	walk = func(v any, set func(any) func(), remove func() func()) {
		places = append(places, place{v, set, remove})
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				old := v[k]
				walk(old,
					func(x any) func() { v[k] = x; return func() { v[k] = old } },
					func() func() { delete(v, k); return func() { v[k] = old } })
			}
		case []any:
			for i := range v {
				old := v[i]
				walk(old,
					func(x any) func() { v[i] = x; return func() { v[i] = old } },
					func() func() { return set(slices.Delete(slices.Clone(v), i, i+1)) })
			}
		}
	}
	walk(doc, func(x any) func() { old := doc; doc = x; return func() { doc = old } }, nil)
	for _, p := range places {
		var undo func()
		switch op % 3 {
		case 0:
			undo = p.set(raw)
		case 1:
			if p.remove == nil {
				continue
			}
			undo = p.remove()
		case 2:
			switch v := p.v.(type) {
			case map[string]any:
				old, had := v[name]
				v[name] = raw
				undo = func() {
					if delete(v, name); had {
						v[name] = old
					}
				}
			case []any:
				undo = p.set(append(slices.Clone(v), raw))
			default:
				continue
			}
		}
		out, err := json.Marshal(doc)
		undo()
		if err == nil {
			yield(out)
		}
	}
}

func TestEachChangeMakesOneChangeAtEveryValue(t *testing.T) {
	const ev = `{"a":{"b":[1,2]},"c":"x"}`
	for _, tc := range []struct {
		op    uint8
		name  string
		value string
		want  []string
	}{
		{0, "", `3`, []string{`3`, `{"a":3,"c":"x"}`, `{"a":{"b":3},"c":"x"}`, `{"a":{"b":[3,2]},"c":"x"}`, `{"a":{"b":[1,3]},"c":"x"}`, `{"a":{"b":[1,2]},"c":3}`}},
		{1, "", `0`, []string{`{"c":"x"}`, `{"a":{},"c":"x"}`, `{"a":{"b":[2]},"c":"x"}`, `{"a":{"b":[1]},"c":"x"}`, `{"a":{"b":[1,2]}}`}},
		{2, "c", `{"e":null}`, []string{`{"a":{"b":[1,2]},"c":{"e":null}}`, `{"a":{"b":[1,2],"c":{"e":null}},"c":"x"}`, `{"a":{"b":[1,2,{"e":null}]},"c":"x"}`}},
		{0, "", `{`, nil},
	} {
		doc, err := decodeStrict([]byte(ev))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		eachChange(doc, tc.op, tc.name, []byte(tc.value), func(b []byte) { got = append(got, string(b)) })
		if !slices.Equal(got, tc.want) {
			t.Errorf("op %d %s %s:\n got %q\nwant %q", tc.op, tc.name, tc.value, got, tc.want)
		}
		if b, _ := json.Marshal(doc); string(b) != ev {
			t.Errorf("op %d: the document is left changed: %s", tc.op, b)
		}
	}
}

// TestExamplesTakeTheFastPath keeps the fuzz test above meaningful: the
// catalog's examples, valid events, must be accepted without jsonschema
// wherever their schema has a fastSchema, and most schemas must have one.
func TestExamplesTakeTheFastPath(t *testing.T) {
	cat := MustDefault()
	withFast := 0
	for _, s := range cat.schemas {
		if s.fast != nil {
			withFast++
		}
	}
	if withFast*2 < len(cat.schemas) {
		t.Errorf("only %d of %d schemas have a fast path", withFast, len(cat.schemas))
	}
	for _, ev := range exampleEvents(t) {
		var head struct {
			EventType    string `json:"event_type"`
			EventVersion int    `json:"event_version"`
		}
		if err := json.Unmarshal(ev, &head); err != nil {
			t.Fatal(err)
		}
		s, err := cat.schema(head.EventType, head.EventVersion)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, accepted := s.acceptsFast(ev); s.fast != nil && !accepted {
			t.Errorf("%s v%d: the fast path refused its example:\n%s", head.EventType, head.EventVersion, ev)
		}
		if s.fast != nil && !s.fast.acceptsEncoded(ev) {
			t.Errorf("%s v%d: the fast path over the bytes refused its example:\n%s", head.EventType, head.EventVersion, ev)
		}
	}
	if err := cat.validateSlow("order.created", 1, []byte(`{`)); !errors.As(err, new(*ValidationError)) {
		t.Errorf("the slow path took a syntax error for %v", err)
	}
}
