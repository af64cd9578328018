package idempotent_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/concordhq/concord/schemas"
)

// TestCatalogVerdictIsJSONSchemas protects what the runner dead-letters: the
// catalog validates events on an allocation-free path and falls back to
// jsonschema only when that path does not accept, so for every example of
// the catalog and many mutations of it, its verdict must equal the verdict
// of jsonschema compiling the same files directly.
func TestCatalogVerdictIsJSONSchemas(t *testing.T) {
	cat := schemas.MustDefault()
	fsys := cat.Files()
	versionFile := regexp.MustCompile(`^v([0-9]+)\.schema\.json$`)
	examples, err := fs.Glob(fsys, "events/*/examples/*.json")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	checked := 0
	for _, typ := range cat.Types() {
		files, _ := fs.Glob(fsys, path.Join("events", typ, "v*.schema.json"))
		for _, file := range files {
			m := versionFile.FindStringSubmatch(path.Base(file))
			if m == nil {
				continue
			}
			ver, _ := strconv.Atoi(m[1])
			ref := referenceSchema(t, fsys, file)
			// The type's own examples mutated, and the other types'
			// examples as they are: near misses (wrong const, missing
			// fields).
			for _, ex := range examples {
				raw, _ := fs.ReadFile(fsys, ex)
				docs := [][]byte{raw}
				if path.Base(path.Dir(path.Dir(ex))) == typ {
					docs = mutations(t, raw)
				}
				for i, doc := range docs {
					v, err := decodeNumbers(doc)
					want := err == nil && ref.Validate(v) == nil
					got := cat.ValidateAs(typ, ver, doc) == nil
					if got != want {
						t.Errorf("%s v%d, %s mutation %d: catalog valid=%v, jsonschema valid=%v\n%s", typ, ver, ex, i, got, want, doc)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d verdicts compared", checked)
}

func referenceSchema(t *testing.T, fsys fs.FS, file string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	b, err := fs.ReadFile(fsys, file)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource(file, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// replacements are the values every leaf (and every object member) is
// set to in turn: each type, boundary numbers, numbers spelled as floats,
// empty and malformed strings, formats.
var replacements = []string{
	`null`, `true`, `false`, `0`, `-1`, `1`, `2`, `1.0`, `1.5`, `2e0`, `1e400`, `-9223372036854775809`, `99999999999999999999`,
	`""`, `"x"`, `"EUR"`, `"eur"`, `"EURO"`, `"DE"`, `"ü"`, `"` + string(bytes.Repeat([]byte("y"), 65)) + `"`,
	`"0195f1f0-8a3b-7c6d-9e2f-123456789abc"`, `"not-a-uuid"`, `"2026-11-29T09:00:00Z"`, `"2026-13-29T09:00:00Z"`,
	`"order.created"`, `"order"`, `[]`, `[1]`, `{}`, `{"sku":"A","quantity":1,"unit_price":0}`,
	`[{"sku":"A","quantity":0,"unit_price":0}]`, `[{"sku":"A","quantity":1.0,"unit_price":1}]`,
}

// mutations returns the document, then copies with each member removed,
// each value replaced by each of replacements, and an unknown member added,
// at every depth.
func mutations(t *testing.T, raw []byte) [][]byte {
	t.Helper()
	root, err := decodeNumbers(raw)
	if err != nil {
		t.Fatal(err)
	}
	out := [][]byte{raw}
	var walk func(v any, set func(any), del func())
	emit := func() {
		b, err := json.Marshal(root)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	walk = func(v any, set func(any), del func()) {
		for _, r := range replacements {
			nv, err := decodeNumbers([]byte(r)) // keeps `1.0` and `1e400` as written
			if err != nil {
				t.Fatal(err)
			}
			set(nv)
			emit()
		}
		set(v)
		if del != nil {
			del()
			emit()
			set(v)
		}
		switch v := v.(type) {
		case map[string]any:
			v["zz_unknown"] = "x"
			emit()
			delete(v, "zz_unknown")
			for k, child := range v {
				walk(child, func(nv any) { v[k] = nv }, func() { delete(v, k) })
			}
		case []any:
			for i, child := range v {
				walk(child, func(nv any) { v[i] = nv }, nil)
			}
		}
	}
	walk(root, func(nv any) { root = nv }, nil)
	// Spellings json.Marshal never produces: escapes, bad UTF-8, number
	// forms, repeated names, whitespace, trailing bytes.
	canon, _ := json.Marshal(root)
	for _, r := range [][2]string{
		{`"EUR"`, `"\u0045UR"`}, {`"EUR"`, `"E\u00dcR"`}, {`"EUR"`, `"EU\ud800"`}, {`"EUR"`, `"EU\ud83d\ude00"`},
		{`"EUR"`, "\"EU\xff\""}, {`"EUR"`, `"E\/R"`}, {`"EUR"`, `"E\tR"`}, {`"EUR"`, "\"E\tR\""}, {`"EUR"`, `"E\qR"`},
		{`"currency":"EUR"`, `"currency":"eur","currency":"EUR"`}, {`"currency":"EUR"`, `"currency":"EUR","currency":"eur"`},
		{`:1`, `:01`}, {`:1`, `:-0`}, {`:1`, `:1E0`}, {`:1`, `:1e+0`}, {`:1`, `:1.`}, {`:1`, `: 1 `}, {`:1`, `:-`},
		{`,"`, " ,\n\t\r\""}, {`true`, `tru`}, {`{`, `{ `},
	} {
		if m := bytes.Replace(canon, []byte(r[0]), []byte(r[1]), 1); !bytes.Equal(m, canon) {
			out = append(out, m)
		}
	}
	out = append(out, append(append([]byte(nil), canon...), " x"...), append(append([]byte(nil), canon...), '}'))
	out = append(out, []byte(`{`), []byte(`[]`), []byte(fmt.Sprintf("%q", "x")))
	return out
}
