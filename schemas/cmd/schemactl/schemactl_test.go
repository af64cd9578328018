package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fixture is a schemas module in a temporary git repository.
type fixture struct {
	t    *testing.T
	root string // the repository
	dir  string // root/schemas, the module
}

const fixtureCatalog = `{"thing.happened": {"topic": "thing-events", "key_field": "thing_id", "encoding": "json", "compatibility": "BACKWARD"}}`

// envelope returns a JSON Schema of thing.happened version v whose data
// object is closed and has the given extra properties and required list.
func envelope(v int, dataProps, dataRequired string) string {
	return `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["event_type", "event_version", "data"],
  "properties": {
    "event_type": {"const": "thing.happened"},
    "event_version": {"const": ` + strconv.Itoa(v) + `},
    "data": {
      "type": "object",
      "additionalProperties": false,
      "required": ["thing_id", "amount"` + dataRequired + `],
      "properties": {
        "thing_id": {"type": "string", "minLength": 1},
        "amount": {"type": "integer", "minimum": 0}` + dataProps + `
      }
    }
  }
}`
}

const fixtureExample = `{"event_type": "thing.happened", "event_version": 1, "data": {"thing_id": "t1", "amount": 50}}`

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for schemactl check")
	}
	root := t.TempDir()
	f := &fixture{t: t, root: root, dir: filepath.Join(root, "schemas")}
	f.git("init", "-q", "-b", "main")
	f.write("events/catalog.json", fixtureCatalog)
	f.write("events/thing.happened/v1.schema.json", envelope(1, "", ""))
	f.write("events/thing.happened/examples/v1-basic.json", fixtureExample)
	f.commit("v1")
	return f
}

func (f *fixture) git(args ...string) {
	f.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = f.root
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func (f *fixture) write(rel, content string) {
	f.t.Helper()
	p := filepath.Join(f.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) commit(msg string) {
	f.t.Helper()
	f.git("add", "-A")
	f.git("commit", "-q", "-m", msg)
}

// schemactl runs the command in-process and returns exit code and output.
func schemactl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestCheckRejectsAnIncompatibleNewVersionWithItsPointer(t *testing.T) {
	f := newFixture(t)
	// A required property added to a closed object: v1 data lacks it.
	f.write("events/thing.happened/v2.schema.json", envelope(2, `, "memo": {"type": "string"}`, `, "memo"`))
	code, out, errOut := schemactl(t, "check", "--base", "HEAD", "--dir", f.dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	want := "schemas/events/thing.happened/v2.schema.json: /properties/data/properties/memo: REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if !strings.Contains(out, "OLD_EXAMPLE_REJECTED") || !strings.Contains(out, "examples/v1-basic.json") {
		t.Errorf("the v1 example, which lacks memo, is not reported as rejected by v2:\n%s", out)
	}
}

func TestCheckAcceptsACompatibleNewVersion(t *testing.T) {
	f := newFixture(t)
	// An optional property added to a closed object: BACKWARD-compatible.
	f.write("events/thing.happened/v2.schema.json", envelope(2, `, "memo": {"type": "string"}`, ""))
	code, out, errOut := schemactl(t, "check", "--base", "HEAD", "--dir", f.dir)
	if code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
	}
	// Committed, the same v2 is released and checks clean against its parent too.
	f.commit("v2")
	if code, out, errOut := schemactl(t, "check", "--base", "HEAD~1", "--dir", f.dir); code != 0 {
		t.Fatalf("against HEAD~1: exit %d, want 0\n%s%s", code, out, errOut)
	}
}

func TestCheckRejectsAnEditToAReleasedVersion(t *testing.T) {
	f := newFixture(t)
	edited := strings.Replace(envelope(1, "", ""), `"minimum": 0`, `"minimum": 1`, 1)
	f.write("events/thing.happened/v1.schema.json", edited)
	code, out, errOut := schemactl(t, "check", "--base", "HEAD", "--dir", f.dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	want := "schemas/events/thing.happened/v1.schema.json: /properties/data/properties/amount/minimum: RELEASED_VERSION_CHANGED: 0 → 1"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

func TestCheckAcceptsAWhitespaceOnlyEditToAReleasedVersion(t *testing.T) {
	f := newFixture(t)
	var v any
	if err := json.Unmarshal([]byte(envelope(1, "", "")), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(v, "", "\t")
	f.write("events/thing.happened/v1.schema.json", string(b))
	if code, out, errOut := schemactl(t, "check", "--base", "HEAD", "--dir", f.dir); code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
	}
}

func TestCheckRejectsADeletedVersionAndARoutingChange(t *testing.T) {
	f := newFixture(t)
	f.write("events/thing.happened/v2.schema.json", envelope(2, "", ""))
	f.commit("v2")
	if err := os.Remove(filepath.Join(f.dir, "events/thing.happened/v2.schema.json")); err != nil {
		t.Fatal(err)
	}
	f.write("events/catalog.json", strings.Replace(fixtureCatalog, "thing-events", "other-events", 1))
	code, out, _ := schemactl(t, "check", "--base", "HEAD", "--dir", f.dir)
	if code != 1 || !strings.Contains(out, "RELEASED_VERSION_DELETED") || !strings.Contains(out, "/thing.happened/topic: CATALOG_TOPIC_CHANGED") {
		t.Fatalf("exit %d, want 1 with RELEASED_VERSION_DELETED and CATALOG_TOPIC_CHANGED:\n%s", code, out)
	}
}

func TestCheckFormats(t *testing.T) {
	f := newFixture(t)
	f.write("events/thing.happened/v2.schema.json", envelope(2, `, "memo": {"type": "string"}`, `, "memo"`))
	_, out, _ := schemactl(t, "check", "--base", "HEAD", "--dir", f.dir, "--format", "github")
	if !strings.HasPrefix(out, "::error file=schemas/events/thing.happened/v2.schema.json,title=REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL::/properties/data/properties/memo") {
		t.Errorf("github format:\n%s", out)
	}
	_, out, _ = schemactl(t, "check", "--base", "HEAD", "--dir", f.dir, "--format", "json")
	var p problem
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &p); err != nil || p.Rule == "" || p.Pointer == "" || p.File == "" {
		t.Errorf("json format: %v\n%s", err, out)
	}
}

func TestCheckWithoutABaseComparesNothingAndSaysSo(t *testing.T) {
	f := newFixture(t)
	code, _, errOut := schemactl(t, "check", "--base", "", "--dir", f.dir)
	if code != 0 || !strings.Contains(errOut, "no base revision") {
		t.Fatalf("exit %d, stderr %q; want 0 and a note", code, errOut)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	f := newFixture(t)
	for name, args := range map[string][]string{
		"no command":       {},
		"unknown command":  {"frobnicate"},
		"check, no base":   {"check", "--dir", f.dir},
		"unknown base":     {"check", "--base", "no-such-ref", "--dir", f.dir},
		"bad format":       {"lint", "--dir", f.dir, "--format", "xml"},
		"bad flag":         {"lint", "--frob"},
		"diff, one file":   {"diff", "a.json"},
		"diff, bad mode":   {"diff", "--mode", "SIDEWAYS", "a.json", "b.json"},
		"diff, no file":    {"diff", "/nonexistent/a.json", "/nonexistent/b.json"},
		"register, no URL": {"register", "--dir", f.dir},
		"no module":        {"lint", "--dir", t.TempDir()},
	} {
		if code, _, _ := schemactl(t, args...); code != 2 {
			t.Errorf("%s: exit %d, want 2", name, code)
		}
	}
	// The command line was fine; the work failed.
	if code, _, _ := schemactl(t, "register", "--registry", "http://127.0.0.1:1", "--dir", f.dir); code != 1 {
		t.Errorf("unreachable registry: exit %d, want 1", code)
	}
	code, out, _ := schemactl(t, "--help")
	if code != 0 || !strings.Contains(out, "BACKWARD_TRANSITIVE") || !strings.Contains(out, "--base") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
}

// TestLintChecksTheSubjectEachStrategyNeeds: a record strategy needs a
// title in every version, the same in each; two types may not share a
// subject.
func TestLintChecksTheSubjectEachStrategyNeeds(t *testing.T) {
	titled := func(v int, title string) string {
		return strings.Replace(envelope(v, "", ""), `"type": "object",`, `"title": "`+title+`", "type": "object",`, 1)
	}
	const recordCatalog = `{"thing.happened": {"topic": "thing-events", "key_field": "thing_id", "subject_strategy": "TopicRecordNameStrategy"}}`
	for _, tc := range []struct {
		name    string
		catalog string
		v1, v2  string
		want    string // "" when lint passes
	}{
		{"topic strategy needs no title", fixtureCatalog, envelope(1, "", ""), envelope(2, "", ""), ""},
		{"record strategy with one title", recordCatalog, titled(1, "ThingHappened"), titled(2, "ThingHappened"), ""},
		{"record strategy without a title", recordCatalog, titled(1, "ThingHappened"), envelope(2, "", ""), "v2.schema.json: /title: SUBJECT_RECORD_NAME_MISSING"},
		{"record strategy with titles that differ", recordCatalog, titled(1, "ThingHappened"), titled(2, "ThingHappened v2"), `v2.schema.json: /title: SUBJECT_RECORD_NAME_CHANGED: ThingHappened → ThingHappened v2`},
		{"unknown strategy", strings.Replace(recordCatalog, "TopicRecordNameStrategy", "TypeStrategy", 1), titled(1, "T"), titled(2, "T"), "/thing.happened/subject_strategy: CATALOG_SUBJECT_STRATEGY_INVALID"},
		{"two types in one topic subject", `{"thing.happened": {"topic": "thing-events", "key_field": "thing_id"}, "thing.vanished": {"topic": "thing-events", "key_field": "thing_id"}}`,
			envelope(1, "", ""), envelope(2, "", ""), `/thing.vanished/subject_strategy: SUBJECT_SHARED: (absent) → thing-events-value`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.write("events/catalog.json", tc.catalog)
			f.write("events/thing.happened/v1.schema.json", tc.v1)
			f.write("events/thing.happened/v2.schema.json", tc.v2)
			if strings.Contains(tc.catalog, "thing.vanished") {
				f.write("events/thing.vanished/v1.schema.json", strings.ReplaceAll(envelope(1, "", ""), "thing.happened", "thing.vanished"))
				f.write("events/thing.vanished/examples/v1-basic.json", strings.ReplaceAll(fixtureExample, "thing.happened", "thing.vanished"))
			}
			code, out, errOut := schemactl(t, "lint", "--dir", f.dir)
			if tc.want == "" {
				if code != 0 {
					t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
				}
				return
			}
			if code != 1 || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want 1 with %q\n%s%s", code, tc.want, out, errOut)
			}
		})
	}
}

// TestCheckAcceptsARetitledReleasedVersion: the root title of a released
// JSON Schema may change (it is the record name a type adopting a record
// strategy registers under); any other change to it is still refused.
func TestCheckAcceptsARetitledReleasedVersion(t *testing.T) {
	f := newFixture(t)
	retitled := strings.Replace(envelope(1, "", ""), `"type": "object",`, `"title": "ThingHappened", "type": "object",`, 1)
	f.write("events/thing.happened/v1.schema.json", retitled)
	if code, out, errOut := schemactl(t, "check", "--base", "HEAD", "--dir", f.dir); code != 0 {
		t.Fatalf("retitled: exit %d, want 0\n%s%s", code, out, errOut)
	}
	f.write("events/thing.happened/v1.schema.json", strings.Replace(retitled, `"title": "ThingHappened",`, `"title": "ThingHappened", "description": "x",`, 1))
	if code, out, _ := schemactl(t, "check", "--base", "HEAD", "--dir", f.dir); code != 1 || !strings.Contains(out, "RELEASED_VERSION_CHANGED") {
		t.Fatalf("described: exit %d, want 1 with RELEASED_VERSION_CHANGED\n%s", code, out)
	}
}
