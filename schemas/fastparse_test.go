package schemas

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseFastDecodesAsEncodingJSON holds parseFast to its contract:
// when it reports true, encoding/json (a Decoder with UseNumber, over the
// whole input) accepts the input too and decodes the same value; so
// whatever encoding/json rejects, parseFast rejects. It may refuse valid
// JSON only for the reasons it names: invalid UTF-8, a \u escape of a
// surrogate, nesting deeper than fastMaxDepth.
func FuzzParseFastDecodesAsEncodingJSON(f *testing.F) {
	for _, ev := range exampleEvents(f) {
		f.Add(ev)
	}
	for _, s := range []string{
		`null`, `true`, `false`, `0`, `-0`, `1.5e-3`, `""`, `[]`, `{}`, ` [ 1 , {"a" : [ ] } ] `,
		`{"a":1,"a":2}`, `"\u00e9\n\t\"\\\/"`, `"\ud83d\ude00"`, `"` + "\xff" + `"`,
		strings.Repeat(`[`, fastMaxDepth+1) + strings.Repeat(`]`, fastMaxDepth+1),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseFast(b)
		want, err := decodeStrict(b)
		if ok {
			if err != nil {
				t.Fatalf("parseFast accepted %q, which encoding/json rejects: %v", b, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("parseFast(%q)\n got %#v\nwant %#v", b, got, want)
			}
			return
		}
		if err == nil && !mayRefuse(b, want) {
			t.Fatalf("parseFast refused %q, valid JSON outside the cases it may leave to encoding/json", b)
		}
	})
}

// decodeStrict is encoding/json's verdict on b as one document: the
// Decoder with UseNumber, as ValidateAs's slow path decodes, after
// json.Valid has rejected anything after the value (which the Decoder
// would leave unread).
func decodeStrict(b []byte) (any, error) {
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v) // for its message
		if err == nil {
			panic("json.Valid and json.Unmarshal disagree")
		}
		return nil, err
	}
	return decodeDocument(b)
}

var surrogateEscape = regexp.MustCompile(`\\u[dD][89abcdefABCDEF]`)

// mayRefuse reports whether valid JSON b (decoded: v) falls under one of
// the cases parseFast leaves to encoding/json.
func mayRefuse(b []byte, v any) bool {
	return !utf8.Valid(b) || surrogateEscape.Match(b) || depth(v) > fastMaxDepth
}

// depth is the number of arrays and objects around v's deepest value.
func depth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, 1+depth(e))
		}
	case []any:
		for _, e := range v {
			d = max(d, 1+depth(e))
		}
	}
	return d
}

func TestParseFastAcceptsTheExamples(t *testing.T) {
	for _, ev := range exampleEvents(t) {
		if _, ok := parseFast(ev); !ok {
			t.Errorf("parseFast refused an example event:\n%s", ev)
		}
	}
	deep := strings.Repeat(`[`, fastMaxDepth) + `1` + strings.Repeat(`]`, fastMaxDepth)
	if _, ok := parseFast([]byte(deep)); !ok {
		t.Errorf("parseFast refused %d nested arrays", fastMaxDepth)
	}
	if _, ok := parseFast(bytes.Replace([]byte(deep), []byte(`1`), []byte(`[1]`), 1)); ok {
		t.Errorf("parseFast accepted %d nested arrays", fastMaxDepth+1)
	}
}
