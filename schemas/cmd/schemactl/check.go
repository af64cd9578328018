package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/compat"
)

func runCheck(args []string, stdout, stderr io.Writer) (int, error) {
	fl := newFlags("check", stdout)
	dirFlag := addDirFlag(fl)
	format := fl.String("format", "text", "output format: text, json or github")
	base := fl.String("base", "\x00", "git revision to compare with; \"\" for none")
	if err := parse(fl, args); err != nil {
		return 0, err
	}
	if fl.NArg() != 0 {
		return 0, usagef("check takes no arguments")
	}
	if *base == "\x00" {
		return 0, usagef("check needs --base GIT_REF (pass --base \"\" when there is no base)")
	}
	rep, err := newReporter(stdout, *format)
	if err != nil {
		return 0, err
	}
	dir, err := moduleDir(*dirFlag)
	if err != nil {
		return 0, err
	}
	if *base == "" {
		fmt.Fprintln(stderr, "schemactl check: no base revision (first commit or shallow clone): nothing to compare against, compatibility not checked")
		return 0, nil
	}
	old, err := gitTree(dir, *base)
	if err != nil {
		return 0, err
	}
	cur, err := diskTree(dir)
	if err != nil {
		return 0, err
	}
	if err := check(dir, old, cur, displayer(dir), rep); err != nil {
		return 0, err
	}
	if rep.count == 0 && *format == "text" {
		fmt.Fprintf(stderr, "schemactl check: compatible with %s\n", *base)
	}
	return rep.count, nil
}

// check compares the working tree with the base tree: released files keep
// their meaning, catalog entries keep their routing, and new versions keep
// the promise of their type's compatibility mode.
func check(dir string, old, cur tree, show func(string) string, rep *reporter) error {
	oldCat, err := old.catalog()
	if err != nil {
		return fmt.Errorf("base: %w", err)
	}
	curCat, err := cur.catalog()
	if err != nil {
		rep.report(problem{File: show("events/catalog.json"), Rule: "CATALOG_INVALID", Hint: err.Error()})
		return nil
	}

	// Released version files are immutable.
	released := map[string]bool{}
	for _, vf := range old.versions() {
		released[vf.path] = true
		now, ok := cur[vf.path]
		if !ok {
			rep.report(problem{File: show(vf.path), Rule: "RELEASED_VERSION_DELETED",
				Hint: "a released version stays: consumers and stored data still use it"})
			continue
		}
		before, after := old[vf.path], now
		if !vf.avro {
			before, after = withoutTitle(before), withoutTitle(now)
		}
		ptr, differ, err := compat.FirstDifference(before, after)
		if err != nil {
			rep.report(problem{File: show(vf.path), Rule: "SCHEMA_INVALID", Hint: err.Error()})
			continue
		}
		if differ {
			rep.report(problem{File: show(vf.path), Pointer: ptr, Rule: "RELEASED_VERSION_CHANGED",
				Old: valueAt(old[vf.path], ptr), New: valueAt(now, ptr),
				Hint: fmt.Sprintf("v%d is released and immutable: revert it and add v%d with the change", vf.version, latest(cur, vf)+1)})
		}
	}

	// Catalog entries keep routing.
	for _, typ := range sortedTypes(oldCat) {
		o := oldCat[typ]
		n, ok := curCat[typ]
		ptr := "/" + typ
		if !ok {
			rep.report(problem{File: show("events/catalog.json"), Pointer: ptr, Rule: "TYPE_REMOVED", Old: typ,
				Hint: "consumers may still receive this type; keep it in the catalog"})
			continue
		}
		for _, f := range []struct{ name, o, n, rule string }{
			{"topic", o.Topic, n.Topic, "CATALOG_TOPIC_CHANGED"},
			{"key_field", o.KeyField, n.KeyField, "CATALOG_KEY_FIELD_CHANGED"},
			{"encoding", o.Encoding, n.Encoding, "CATALOG_ENCODING_CHANGED"},
		} {
			if f.o != f.n {
				rep.report(problem{File: show("events/catalog.json"), Pointer: ptr + "/" + f.name, Rule: f.rule, Old: f.o, New: f.n,
					Hint: "existing consumers and per-key order depend on it; introduce a new event type instead"})
			}
		}
	}

	// New versions against earlier ones.
	var cat *schemas.Catalog
	if c, err := schemas.Load(os.DirFS(dir)); err == nil {
		cat = c
	} else {
		rep.report(problem{File: show("events/catalog.json"), Rule: "CATALOG_LOAD_FAILED", Hint: err.Error() + " (run schemactl lint)"})
	}
	byKind := map[[2]string][]versionFile{}
	for _, vf := range cur.versions() {
		k := [2]string{vf.typ, fmt.Sprint(vf.avro)}
		byKind[k] = append(byKind[k], vf)
	}
	for _, typ := range sortedTypes(curCat) {
		mode, err := compat.ParseMode(curCat[typ].Compatibility)
		if err != nil {
			rep.report(problem{File: show("events/catalog.json"), Pointer: "/" + typ + "/compatibility", Rule: "CATALOG_MODE_INVALID", Hint: err.Error()})
			continue
		}
		for _, kind := range []string{"false", "true"} {
			files := byKind[[2]string{typ, kind}]
			for i, vf := range files {
				if released[vf.path] {
					continue
				}
				for _, j := range mode.Against(i) {
					checkPair(cur, files[j], vf, mode, show, rep)
					if kind == "false" && cat != nil {
						checkExamples(cat, cur, typ, files[j].version, vf.version, mode, show, rep)
					}
				}
			}
		}
	}
	return nil
}

func latest(t tree, vf versionFile) int {
	n := vf.version
	for _, o := range t.versions() {
		if o.typ == vf.typ && o.avro == vf.avro && o.version > n {
			n = o.version
		}
	}
	return n
}

// checkPair reports the changes from earlier to next that break mode.
func checkPair(t tree, earlier, next versionFile, mode compat.Mode, show func(string) string, rep *reporter) {
	f := compat.JSONSchema
	if next.avro {
		f = compat.Avro
	}
	changes, err := compat.Diff(f, t[earlier.path], t[next.path])
	if err != nil {
		rep.report(problem{File: show(next.path), Rule: "SCHEMA_INVALID", Hint: err.Error()})
		return
	}
	for _, c := range mode.Incompatible(changes) {
		hint := fmt.Sprintf("breaks %s against v%d", mode, earlier.version)
		if c.Hint != "" {
			hint += ": " + c.Hint
		}
		rep.report(problem{File: show(next.path), Pointer: c.Pointer, Rule: c.Rule, Old: c.Old, New: c.New, Hint: hint})
	}
}

// checkExamples runs the examples of version from under version to when
// the mode promises BACKWARD, and the examples of to under from when it
// promises FORWARD. The event_version of an example is set to the version
// it is checked against: the number changes, the payload must still fit.
func checkExamples(cat *schemas.Catalog, t tree, typ string, from, to int, mode compat.Mode, show func(string) string, rep *reporter) {
	run := func(exVersion, schemaVersion int, rule string) {
		for _, p := range examplesOf(t, typ, exVersion) {
			b, err := withVersion(t[p], schemaVersion)
			if err != nil {
				rep.report(problem{File: show(p), Rule: "EXAMPLE_INVALID", Hint: err.Error()})
				continue
			}
			if err := cat.ValidateAs(typ, schemaVersion, b); err != nil {
				pr := problem{File: show(p), Rule: rule, New: fmt.Sprintf("v%d", schemaVersion),
					Hint: fmt.Sprintf("%s promises this v%d event stays readable by v%d: %v", mode, exVersion, schemaVersion, err)}
				var ve *schemas.ValidationError
				if errors.As(err, &ve) {
					pr.Pointer = ve.Pointer
				}
				rep.report(pr)
			}
		}
	}
	if mode.PromisesBackward() {
		run(from, to, "OLD_EXAMPLE_REJECTED")
	}
	if mode.PromisesForward() {
		run(to, from, "NEW_EXAMPLE_REJECTED_BY_OLD_VERSION")
	}
}

// examplesOf lists the examples of a type whose event_version is v.
func examplesOf(t tree, typ string, v int) []string {
	var out []string
	prefix := path.Join("events", typ, "examples") + "/"
	for p, b := range t {
		if !strings.HasPrefix(p, prefix) || !strings.HasSuffix(p, ".json") {
			continue
		}
		var head struct {
			EventVersion int `json:"event_version"`
		}
		if json.Unmarshal(b, &head) == nil && head.EventVersion == v {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func withVersion(b []byte, v int) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["event_version"] = json.RawMessage(fmt.Sprint(v))
	return json.Marshal(m)
}

// valueAt renders the value at a JSON pointer of a document, "" when absent.
func valueAt(doc []byte, ptr string) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return ""
	}
	if ptr != "" {
		for _, tok := range strings.Split(ptr[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch x := v.(type) {
			case map[string]any:
				var ok bool
				if v, ok = x[tok]; !ok {
					return ""
				}
			case []any:
				var i int
				if _, err := fmt.Sscan(tok, &i); err != nil || i < 0 || i >= len(x) {
					return ""
				}
				v = x[i]
			default:
				return ""
			}
		}
	}
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:117]) + "..."
	}
	return string(b)
}

// withoutTitle drops a JSON Schema's root title before a released file is
// compared with its base. Validation ignores the title, and it is the
// record name that a record subject strategy registers the type under, so
// a type adopting one may retitle its released versions to one name.
// Bytes that do not parse are returned as they are, for
// compat.FirstDifference to report.
func withoutTitle(b []byte) []byte {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return b
	}
	delete(doc, "title")
	out, err := json.Marshal(doc)
	if err != nil {
		return b
	}
	return out
}
