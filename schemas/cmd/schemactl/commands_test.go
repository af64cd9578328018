package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/avro"
)

// moduleRoot is the schemas module, two levels up from this package.
const moduleRoot = "../.."

func TestLintPassesOnTheRepositorysSchemas(t *testing.T) {
	if code, out, errOut := schemactl(t, "lint", "--dir", moduleRoot); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

func TestLintReportsEachKindOfDefect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(f *fixture)
		rule  string
		where string
	}{
		{"event_version constant disagrees with the path", func(f *fixture) {
			f.write("events/thing.happened/v2.schema.json", envelope(3, "", ""))
		}, "EVENT_VERSION_MISMATCH", "v2.schema.json: /properties/event_version/const"},
		{"event_type constant disagrees with the path", func(f *fixture) {
			f.write("events/thing.happened/v1.schema.json", strings.Replace(envelope(1, "", ""), `"const": "thing.happened"`, `"const": "thing.other"`, 1))
		}, "EVENT_TYPE_MISMATCH", "v1.schema.json: /properties/event_type/const"},
		{"a version is skipped", func(f *fixture) {
			f.write("events/thing.happened/v3.schema.json", envelope(3, "", ""))
		}, "VERSIONS_NOT_CONTIGUOUS", "v3.schema.json"},
		{"an example breaks its schema", func(f *fixture) {
			f.write("events/thing.happened/examples/v1-bad.json", strings.Replace(fixtureExample, `"amount": 50`, `"amount": -1`, 1))
		}, "EXAMPLE_INVALID", "v1-bad.json: /data/amount"},
		{"a directory is not in the catalog", func(f *fixture) {
			f.write("events/stray.type/v1.schema.json", envelope(1, "", ""))
		}, "TYPE_NOT_IN_CATALOG", "stray.type"},
		{"an Avro-encoded type has no .avsc twin", func(f *fixture) {
			f.write("events/catalog.json", strings.Replace(fixtureCatalog, `"encoding": "json"`, `"encoding": "avro"`, 1))
		}, "AVRO_TWIN_MISSING", "v1.schema.json"},
		{"an .avsc does not compile", func(f *fixture) {
			f.write("events/thing.happened/v1.avsc", `{"type": "record", "name": "T", "fields": [{"name": "x", "type": "nope"}]}`)
		}, "AVRO_SCHEMA_INVALID", "v1.avsc"},
		{"an unknown compatibility mode", func(f *fixture) {
			f.write("events/catalog.json", strings.Replace(fixtureCatalog, `"BACKWARD"`, `"SIDEWAYS"`, 1))
		}, "CATALOG_MODE_INVALID", "/thing.happened/compatibility"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if code, out, _ := schemactl(t, "lint", "--dir", f.dir); code != 0 {
				t.Fatalf("fixture does not lint clean: %s", out)
			}
			tc.edit(f)
			code, out, _ := schemactl(t, "lint", "--dir", f.dir)
			if code != 1 || !strings.Contains(out, tc.rule) || !strings.Contains(out, tc.where) {
				t.Fatalf("exit %d, want 1 with %s at %s:\n%s", code, tc.rule, tc.where, out)
			}
		})
	}
}

func TestDiffExitCodeFollowsTheMode(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	closed := write("old.json", `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`)
	added := write("new.json", `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"},"b":{"type":"string"}}}`)
	oldAvro := write("old.avsc", `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`)
	newAvro := write("new.avsc", `{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}`)
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"diff", closed, added}, 0, "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL [backward-only]"},
		{[]string{"diff", "--mode", "FORWARD", closed, added}, 1, "BREAKS FORWARD"},
		{[]string{"diff", "--mode", "NONE", closed, added}, 0, "/properties/b"},
		{[]string{"diff", added, closed}, 1, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"},
		{[]string{"diff", oldAvro, newAvro}, 0, "TYPE_PROMOTED"},
		{[]string{"diff", "--mode", "full", oldAvro, newAvro}, 1, "/fields/0/type/type"},
		{[]string{"diff", "--format", "json", closed, added}, 0, `"class":"backward-only"`},
		{[]string{"diff", closed, newAvro}, 2, ""},
	} {
		code, out, _ := schemactl(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", tc.args[1:], code, tc.code, tc.out, out)
		}
	}
}

func TestRegisterDryRunChecksAndRegistersNothing(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	code, out, errOut := schemactl(t, "register", "--registry", reg.URL(), "--dry-run", "--dir", moduleRoot)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"account-events-value: account.debited v1 (AVRO, FULL_TRANSITIVE): compatible, would register",
		"order-events-OrderCreated: order.created v2 (JSON, BACKWARD_TRANSITIVE): compatible, would register",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	for _, subject := range []string{"account-events-value", "order-events-OrderCreated"} {
		if reg.SubjectExists(subject) {
			t.Errorf("--dry-run registered %s", subject)
		}
	}
}

func TestRegisterPushesEverySubjectAndTheSerdeUsesItsIDs(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	code, out, errOut := schemactl(t, "register", "--registry", reg.URL(), "--dir", moduleRoot)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	versions, err := cl.SubjectVersions(ctx, "order-events-OrderCreated")
	if err != nil || len(versions) != 3 {
		t.Fatalf("order-events-OrderCreated versions = %v, %v; want 3", versions, err)
	}
	// Pushing again registers nothing new.
	if code, _, errOut := schemactl(t, "register", "--registry", reg.URL(), "--dir", moduleRoot); code != 0 {
		t.Fatalf("second push: exit %d: %s", code, errOut)
	}
	if versions, _ := cl.SubjectVersions(ctx, "order-events-OrderCreated"); len(versions) != 3 {
		t.Errorf("second push added versions: %v", versions)
	}

	// The registry's id for account.debited v1 frames the Avro value.
	cat := schemas.MustDefault()
	ids := func(typ string, v int) (int, error) {
		subject, err := cat.Subject(typ, v)
		if err != nil {
			return 0, err
		}
		ss, err := cl.SchemaByVersion(ctx, subject, v)
		return ss.ID, err
	}
	serde, err := avro.New(cat, ids)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := os.ReadFile(filepath.Join(moduleRoot, "events/account.debited/examples/v1-basic.json"))
	wire, err := serde.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ids("account.debited", 1)
	if got := int(wire[1])<<24 | int(wire[2])<<16 | int(wire[3])<<8 | int(wire[4]); got != want {
		t.Errorf("wire schema id %d, registry id %d", got, want)
	}
	var regSchema map[string]any
	ss, _ := cl.SchemaByVersion(ctx, "order-events-OrderCreated", 1)
	if err := json.Unmarshal([]byte(ss.Schema.Schema), &regSchema); err != nil {
		t.Fatal(err)
	}
	if ev := regSchema["properties"].(map[string]any)["event_version"]; strings.Contains(toJSON(ev), "const") {
		t.Errorf("registered JSON Schema keeps the event_version const: %s", toJSON(ev))
	}
}

func toJSON(v any) string { b, _ := json.Marshal(v); return string(b) }
