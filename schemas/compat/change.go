// Package compat is Concord's schema compatibility engine. It compares two
// versions of one schema — JSON Schema 2020-12 or Avro — and lists every
// change with the rule it falls under and which promise it breaks, then
// judges the list under a Confluent Schema Registry compatibility mode.
//
// It is pure: it reads the bytes it is given and nothing else, so CI, the
// registry push and tests all see the same verdicts.
//
// Direction follows Confluent. BACKWARD means the new schema can read data
// written with the old one (upgrade consumers first); FORWARD means the old
// schema can read data written with the new one (upgrade producers first).
package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Format is the schema language of a file.
type Format string

// Schema languages the engine understands.
const (
	JSONSchema Format = "json"
	Avro       Format = "avro"
)

// FormatOf infers the schema language from a file name: .avsc is Avro,
// anything else JSON Schema.
func FormatOf(name string) Format {
	if strings.EqualFold(path.Ext(name), ".avsc") {
		return Avro
	}
	return JSONSchema
}

// Change is one difference between an old and a new version of a schema.
//
// Rule names the kind of change. For JSON Schema it is the name Confluent
// Schema Registry's SchemaDiff gives it (PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL,
// TYPE_EXTENDED, ...), read from old to new. For Avro it is the name of the
// Avro schema-resolution outcome (READER_FIELD_MISSING_DEFAULT_VALUE,
// MISSING_UNION_BRANCH, TYPE_PROMOTED, ...).
type Change struct {
	Pointer        string `json:"pointer"` // where, as a JSON pointer into the schemas ("" the root); for JSON Schema the path Confluent reports (allOf/1 for the second part of a schema mixing kinds, required/NAME)
	Rule           string `json:"rule"`
	Old            string `json:"old"`             // compact JSON of the old value, "" when absent
	New            string `json:"new"`             // compact JSON of the new value, "" when absent
	BreaksBackward bool   `json:"breaks_backward"` // the new schema cannot read all data the old one accepted
	BreaksForward  bool   `json:"breaks_forward"`  // the old schema cannot read all data the new one accepts
	Hint           string `json:"hint,omitempty"`
}

// Class says in a few words which promises the change keeps.
func (c Change) Class() string {
	switch {
	case c.BreaksBackward && c.BreaksForward:
		return "incompatible"
	case c.BreaksBackward:
		return "forward-only"
	case c.BreaksForward:
		return "backward-only"
	}
	return "compatible"
}

// Diff lists every change from old to new. Both must be in format f.
// Changes come in schema order, parents before children.
func Diff(f Format, old, new []byte) ([]Change, error) {
	switch f {
	case Avro:
		return DiffAvro(old, new)
	case JSONSchema, "":
		return DiffJSONSchema(old, new)
	}
	return nil, fmt.Errorf("unknown schema format %q", f)
}

// Canonical re-encodes a JSON document with sorted keys and no
// insignificant whitespace, so two files with the same meaning compare
// equal byte for byte.
func Canonical(doc []byte) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("parse JSON: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("parse JSON: trailing data after the document")
	}
	return json.Marshal(v) // maps marshal with sorted keys
}

// FirstDifference returns the JSON pointer of the first place where two
// documents differ in meaning, and whether they differ at all.
func FirstDifference(a, b []byte) (string, bool, error) {
	va, err := decode(a)
	if err != nil {
		return "", false, err
	}
	vb, err := decode(b)
	if err != nil {
		return "", false, err
	}
	ptr, differ := firstDifference(va, vb, "")
	return ptr, differ, nil
}

func firstDifference(a, b any, ptr string) (string, bool) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return ptr, true
		}
		for _, k := range sortedKeys(x, y) {
			xv, xok := x[k]
			yv, yok := y[k]
			if xok != yok {
				return ptr + "/" + escape(k), true
			}
			if p, d := firstDifference(xv, yv, ptr+"/"+escape(k)); d {
				return p, true
			}
		}
		return "", false
	case []any:
		y, ok := b.([]any)
		if !ok {
			return ptr, true
		}
		for i := 0; i < len(x) || i < len(y); i++ {
			if i >= len(x) || i >= len(y) {
				return fmt.Sprintf("%s/%d", ptr, i), true
			}
			if p, d := firstDifference(x[i], y[i], fmt.Sprintf("%s/%d", ptr, i)); d {
				return p, true
			}
		}
		return "", false
	}
	if compact(a) != compact(b) {
		return ptr, true
	}
	return "", false
}

func decode(doc []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("parse JSON: %w", err)
	}
	return v, nil
}

// compact renders a decoded JSON value as one short line for reports.
func compact(v any) string {
	if v == nil {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	const limit = 120
	if len(b) > limit {
		return string(b[:limit-3]) + "..."
	}
	return string(b)
}

// escape encodes a key as a JSON pointer reference token (RFC 6901).
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func sortedKeys(ms ...map[string]any) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}
