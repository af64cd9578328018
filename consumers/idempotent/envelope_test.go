package idempotent

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/schemas"
)

// TestDecodeEnvelopeIsEncodingJSONs protects the one-pass envelope decoder:
// for the catalog's examples, every prefix of them (syntax errors of all
// kinds) and spellings producers do not use, it must give what
// schemas.DecodeEnvelope (encoding/json) gives: the same envelope, or an
// error.
func TestDecodeEnvelopeIsEncodingJSONs(t *testing.T) {
	examples, err := fs.Glob(schemas.MustDefault().Files(), "events/*/examples/*.json")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	var docs [][]byte
	for _, ex := range examples {
		raw, _ := fs.ReadFile(schemas.MustDefault().Files(), ex)
		env, err := schemas.DecodeEnvelope(raw)
		if err != nil {
			t.Fatal(err)
		}
		canon, _ := env.Marshal()
		docs = append(docs, raw, canon)
		for i := range canon {
			docs = append(docs, canon[:i])
		}
		for _, r := range [][2]string{
			{`"event_id":`, `"EVENT_ID":`}, {`"event_id":`, `"event_\u0069d":`}, {`"event_id":`, `"unknown":"x","event_id":`},
			{`"event_version":`, `"event_version":null,"event_version":`}, {`"event_type":"`, `"event_type":"\u00e9`},
			{`"event_type":"`, `"event_type":"` + "\xff"}, {`"event_type":"`, `"event_type":"` + "\t"}, {`"event_type":"`, `"event_type":"\n`},
			{`"event_type":"`, `"event_type":"ü`}, {`"event_type":"`, `"event_type":1,"x":"`},
			{`"aggregate_id":`, `"aggregate_id":null,"aggregate_id":`}, {`"aggregate_id":"`, `"aggregate_id":"a","aggregate_id":"`},
			{`"timestamp":"`, `"timestamp":"x`}, {`"timestamp":"`, `"timestamp":null,"t":"`}, {`"timestamp":"2`, `"timestamp":"\u0032`},
			{`"data":{`, `"data":{"a":[{"b":{}}],`}, {`"data":{`, `"data":{,`}, {`"data":{`, `"data":{"a" 1,`},
			{`{`, " \n{ "}, {`,`, ` , `},
		} {
			if m := bytes.Replace(canon, []byte(r[0]), []byte(r[1]), 1); !bytes.Equal(m, canon) {
				docs = append(docs, m)
			}
		}
		version := regexp.MustCompile(`"event_version":[^,]*`)
		for _, v := range []string{`2`, `-0`, `02`, `-02`, `2.0`, `2e0`, `-`, `99999999999999999999`, `"2"`, `true`, `null`} {
			docs = append(docs, version.ReplaceAll(canon, []byte(`"event_version":`+v)))
		}
		// data is the last member of a marshalled envelope: replace it whole.
		head := canon[:bytes.LastIndex(canon, []byte(`"data":`))]
		for _, v := range []string{`null`, `[1,2.5e3,-0,true,false,null,"\u00e9\n",{}]`, `"\x"`, `"\u12"`, `"\u12zz"`, `01`, `1.`, `-`, `1e`,
			`"` + "\x01" + `"`, `"` + "\xff" + `"`, ` {"a" : [ ] } `, `{,}`, `{"a" 1}`, `[1,]`, `{"a":1,}`, `tru`, `nul`, `"\ud800"`} {
			docs = append(docs, append(append(bytes.Clone(head), `"data":`+v...), '}'))
		}
		docs = append(docs, append(bytes.Clone(canon), " x"...), append(bytes.Clone(canon), '}'), append(bytes.Clone(canon), " \n"...))
	}
	docs = append(docs, []byte(`{}`), []byte(` {} `), []byte(`[]`), []byte(`null`), []byte(``), []byte(strings.Repeat(`{"data":`, 200)))
	fast := 0
	for _, doc := range docs {
		want, wantErr := schemas.DecodeEnvelope(doc)
		got, gotErr := decodeEnvelope(doc)
		if (wantErr == nil) != (gotErr == nil) || (wantErr == nil && !reflect.DeepEqual(got, want)) {
			t.Errorf("%q:\n got %+v, %v\nwant %+v, %v", doc, got, gotErr, want, wantErr)
		}
		if _, ok := decodeEnvelopeFast(doc); ok {
			fast++
		}
	}
	if fast < len(examples) {
		t.Errorf("only %d of %d documents took the one-pass path; the examples should", fast, len(docs))
	}
	t.Logf("%d documents, %d decoded in one pass", len(docs), fast)
}

// FuzzDecodeEnvelopeFastDecodesAsEncodingJSON holds the one-pass envelope
// decoder to its contract: whenever decodeEnvelopeFast reports ok,
// json.Unmarshal into a schemas.Envelope succeeds and gives the same
// envelope, Data byte for byte (json.RawMessage keeps the value as
// written, and the fast path aliases those bytes); otherwise the record is
// left to encoding/json. decodeEnvelope, fast path and fallback together,
// must give what schemas.DecodeEnvelope gives: the same envelope or an
// error.
func FuzzDecodeEnvelopeFastDecodesAsEncodingJSON(f *testing.F) {
	cat := schemas.MustDefault()
	examples, err := fs.Glob(cat.Files(), "events/*/examples/*.json")
	if err != nil || len(examples) == 0 {
		f.Fatalf("no examples: %v", err)
	}
	for _, ex := range examples {
		raw, err := fs.ReadFile(cat.Files(), ex)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
		env, err := schemas.DecodeEnvelope(raw)
		if err != nil {
			f.Fatal(err)
		}
		canon, err := env.Marshal() // the form producers write
		if err != nil {
			f.Fatal(err)
		}
		f.Add(canon)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, ok := decodeEnvelopeFast(b); ok {
			var want schemas.Envelope
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("the fast path decoded %q, which encoding/json rejects: %v", b, err)
			}
			if !sameEnvelope(got, want) {
				t.Fatalf("%q:\nfast path     %+v\nencoding/json %+v", b, got, want)
			}
		}
		got, gotErr := decodeEnvelope(b)
		want, wantErr := schemas.DecodeEnvelope(b)
		if (gotErr == nil) != (wantErr == nil) || (gotErr == nil && !sameEnvelope(got, want)) {
			t.Fatalf("%q:\ndecodeEnvelope          %+v, %v\nschemas.DecodeEnvelope  %+v, %v", b, got, gotErr, want, wantErr)
		}
	})
}

// sameEnvelope compares every field; Data exactly, the timestamp as an
// instant and in the same zone offset and name.
func sameEnvelope(a, b schemas.Envelope) bool {
	if !bytes.Equal(a.Data, b.Data) || (a.Data == nil) != (b.Data == nil) || !a.Timestamp.Equal(b.Timestamp) {
		return false
	}
	an, ao := a.Timestamp.Zone()
	bn, bo := b.Timestamp.Zone()
	if an != bn || ao != bo {
		return false
	}
	a.Data, b.Data, a.Timestamp, b.Timestamp = nil, nil, time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}
