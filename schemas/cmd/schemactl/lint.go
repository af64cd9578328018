package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/linkedin/goavro/v2"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/avro"
	"github.com/concordhq/concord/schemas/compat"
)

func runLint(args []string, stdout, stderr io.Writer) (int, error) {
	fl := newFlags("lint", stdout)
	dirFlag := addDirFlag(fl)
	format := fl.String("format", "text", "output format: text, json or github")
	if err := parse(fl, args); err != nil {
		return 0, err
	}
	if fl.NArg() != 0 {
		return 0, usagef("lint takes no arguments")
	}
	rep, err := newReporter(stdout, *format)
	if err != nil {
		return 0, err
	}
	dir, err := moduleDir(*dirFlag)
	if err != nil {
		return 0, err
	}
	t, err := diskTree(dir)
	if err != nil {
		return 0, err
	}
	lint(dir, t, displayer(dir), rep)
	if rep.count == 0 && *format == "text" {
		fmt.Fprintf(stderr, "schemactl lint: %d files, no problems\n", len(t))
	}
	return rep.count, nil
}

// lint reports everything wrong with one tree on its own.
func lint(dir string, t tree, show func(string) string, rep *reporter) {
	entries, err := t.catalog()
	if err != nil {
		rep.report(problem{File: show("events/catalog.json"), Rule: "CATALOG_INVALID", Hint: err.Error()})
		return
	}
	cat, loadErr := schemas.Load(os.DirFS(dir))
	if loadErr != nil {
		rep.report(problem{File: show("events/catalog.json"), Rule: "CATALOG_LOAD_FAILED", Hint: loadErr.Error()})
	}

	byType := map[string][]versionFile{}
	for _, vf := range t.versions() {
		byType[vf.typ] = append(byType[vf.typ], vf)
	}
	for p := range t {
		parts := strings.Split(p, "/")
		if len(parts) >= 3 {
			if _, ok := entries[parts[1]]; !ok {
				rep.report(problem{File: show(p), Rule: "TYPE_NOT_IN_CATALOG", Hint: "add " + parts[1] + " to events/catalog.json or remove the directory"})
			}
		}
	}
	subjects := map[string][]string{} // subject → the types registered under it
	for _, typ := range sortedTypes(entries) {
		e := entries[typ]
		catFile := show("events/catalog.json")
		if _, err := compat.ParseMode(e.Compatibility); err != nil {
			rep.report(problem{File: catFile, Pointer: "/" + typ + "/compatibility", Rule: "CATALOG_MODE_INVALID", New: e.Compatibility, Hint: err.Error()})
		}
		if e.Encoding != schemas.EncodingJSON && e.Encoding != schemas.EncodingAvro {
			rep.report(problem{File: catFile, Pointer: "/" + typ + "/encoding", Rule: "CATALOG_ENCODING_INVALID", New: e.Encoding, Hint: "want json or avro"})
		}
		var jsonVersions, avroVersions []int
		for _, vf := range byType[typ] {
			if vf.avro {
				avroVersions = append(avroVersions, vf.version)
				lintAvro(t, vf, show, rep)
			} else {
				jsonVersions = append(jsonVersions, vf.version)
				lintConstants(t, vf, show, rep)
			}
		}
		for i, v := range jsonVersions {
			if v != i+1 {
				rep.report(problem{File: show(fmt.Sprintf("events/%s/v%d.schema.json", typ, v)), Rule: "VERSIONS_NOT_CONTIGUOUS",
					Hint: fmt.Sprintf("versions are %v; they must run v1, v2, ... without gaps", jsonVersions)})
				break
			}
		}
		if len(jsonVersions) == 0 {
			rep.report(problem{File: catFile, Pointer: "/" + typ, Rule: "TYPE_WITHOUT_SCHEMA", Hint: "add events/" + typ + "/v1.schema.json"})
		}
		for _, v := range jsonVersions {
			if e.Encoding == schemas.EncodingAvro && !slices.Contains(avroVersions, v) {
				rep.report(problem{File: show(fmt.Sprintf("events/%s/v%d.schema.json", typ, v)), Rule: "AVRO_TWIN_MISSING",
					Hint: fmt.Sprintf("the type is Avro-encoded: add v%d.avsc beside it", v)})
			}
		}
		for _, v := range avroVersions {
			if !slices.Contains(jsonVersions, v) {
				rep.report(problem{File: show(fmt.Sprintf("events/%s/v%d.avsc", typ, v)), Rule: "AVRO_TWIN_ORPHANED", Hint: "every .avsc needs the v<N>.schema.json it twins"})
			}
		}
		if loadErr == nil {
			lintExamples(cat, typ, e, show, rep)
		}
		if subject, ok := lintSubject(t, typ, e, jsonVersions, show, rep); ok {
			subjects[subject] = append(subjects[subject], typ)
		}
	}
	for _, subject := range slices.Sorted(maps.Keys(subjects)) {
		types := subjects[subject]
		if len(types) < 2 {
			continue
		}
		for _, typ := range types {
			rep.report(problem{File: show("events/catalog.json"), Pointer: "/" + typ + "/subject_strategy", Rule: "SUBJECT_SHARED",
				New: subject, Hint: fmt.Sprintf("%s share the subject %q, which holds one schema lineage; give them %s (or %s) and a title each",
					strings.Join(types, ", "), subject, schemas.TopicRecordNameStrategy, schemas.RecordNameStrategy)})
		}
	}
}

// lintSubject checks that the type's subject name strategy can name its
// subject: under a record strategy every registered schema (the JSON
// Schema, or the .avsc twin of an Avro type) names a record, the same in
// every version, since one subject holds them all. It returns the subject.
func lintSubject(t tree, typ string, e catalogEntry, versions []int, show func(string) string, rep *reporter) (string, bool) {
	strategy, err := schemas.ParseSubjectStrategy(e.SubjectStrategy)
	if err != nil {
		rep.report(problem{File: show("events/catalog.json"), Pointer: "/" + typ + "/subject_strategy", Rule: "CATALOG_SUBJECT_STRATEGY_INVALID",
			New: e.SubjectStrategy, Hint: err.Error()})
		return "", false
	}
	if !schemas.UsesRecordName(strategy) {
		return schemas.SubjectName(strategy, e.Topic, ""), true
	}
	entry := schemas.Entry{Type: typ, Encoding: e.Encoding}
	pointer := "/title"
	if e.Encoding == schemas.EncodingAvro {
		pointer = "/name"
	}
	first, firstVersion := "", 0
	for _, v := range versions {
		file := entry.SchemaFile(v)
		b, ok := t[file]
		if !ok {
			continue // reported as a missing twin
		}
		record, err := schemas.RecordName(e.Encoding, b)
		if err != nil {
			rep.report(problem{File: show(file), Pointer: pointer, Rule: "SUBJECT_RECORD_NAME_MISSING",
				Hint: fmt.Sprintf("%s names the subject after the record: %v", strategy, err)})
			return "", false
		}
		if first == "" {
			first, firstVersion = record, v
			continue
		}
		if record != first {
			rep.report(problem{File: show(file), Pointer: pointer, Rule: "SUBJECT_RECORD_NAME_CHANGED", Old: first, New: record,
				Hint: fmt.Sprintf("v%d names the record %q; under %s the record name is the subject, and every version of a type belongs in one subject", firstVersion, first, strategy)})
			return "", false
		}
	}
	if first == "" {
		return "", false
	}
	return schemas.SubjectName(strategy, e.Topic, first), true
}

func sortedTypes(m map[string]catalogEntry) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// lintConstants checks that the envelope constants of a JSON Schema name
// the type and version of its path.
func lintConstants(t tree, vf versionFile, show func(string) string, rep *reporter) {
	var s struct {
		Properties struct {
			EventType    struct{ Const any } `json:"event_type"`
			EventVersion struct{ Const any } `json:"event_version"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(t[vf.path], &s); err != nil {
		rep.report(problem{File: show(vf.path), Rule: "SCHEMA_INVALID", Hint: err.Error()})
		return
	}
	if s.Properties.EventType.Const != vf.typ {
		rep.report(problem{File: show(vf.path), Pointer: "/properties/event_type/const", Rule: "EVENT_TYPE_MISMATCH",
			New: fmt.Sprint(s.Properties.EventType.Const), Hint: fmt.Sprintf("the path says %q", vf.typ)})
	}
	if v, ok := s.Properties.EventVersion.Const.(float64); !ok || int(v) != vf.version {
		rep.report(problem{File: show(vf.path), Pointer: "/properties/event_version/const", Rule: "EVENT_VERSION_MISMATCH",
			New: fmt.Sprint(s.Properties.EventVersion.Const), Hint: fmt.Sprintf("the path says %d", vf.version)})
	}
}

func lintAvro(t tree, vf versionFile, show func(string) string, rep *reporter) {
	if _, err := goavro.NewCodec(string(t[vf.path])); err != nil {
		rep.report(problem{File: show(vf.path), Rule: "AVRO_SCHEMA_INVALID", Hint: err.Error()})
	}
}

// lintExamples validates every example and, for Avro-encoded types, checks
// it survives JSON → Avro → JSON.
func lintExamples(cat *schemas.Catalog, typ string, e catalogEntry, show func(string) string, rep *reporter) {
	examples, _ := fs.Glob(cat.Files(), path.Join("events", typ, "examples", "*.json"))
	if len(examples) == 0 {
		rep.report(problem{File: show(path.Join("events", typ, "examples")), Rule: "EXAMPLE_MISSING", Hint: "add at least one example per type"})
	}
	var serde *avro.Serde
	if e.Encoding == schemas.EncodingAvro {
		var err error
		// Each type and version gets its own id, as a registry would: with
		// one id for all, decoding would read every type's body with the
		// first type's schema.
		ids := map[string]int{}
		serde, err = avro.New(cat, func(typ string, version int) (int, error) {
			k := fmt.Sprintf("%s/%d", typ, version)
			if _, ok := ids[k]; !ok {
				ids[k] = len(ids) + 1
			}
			return ids[k], nil
		})
		if err != nil {
			rep.report(problem{File: show(path.Join("events", typ)), Rule: "AVRO_SCHEMA_INVALID", Hint: err.Error()})
			serde = nil
		}
	}
	for _, ex := range examples {
		b, _ := fs.ReadFile(cat.Files(), ex)
		if err := cat.Validate(b); err != nil {
			p := problem{File: show(ex), Rule: "EXAMPLE_INVALID", Hint: err.Error()}
			var ve *schemas.ValidationError
			if errors.As(err, &ve) {
				p.Pointer, p.Hint = ve.Pointer, ve.Rule+": "+ve.Message
			}
			rep.report(p)
			continue
		}
		if serde == nil {
			continue
		}
		if err := roundTrip(serde, b); err != nil {
			rep.report(problem{File: show(ex), Rule: "AVRO_ROUND_TRIP_FAILED", Hint: err.Error()})
		}
	}
}

func roundTrip(s *avro.Serde, in []byte) error {
	wire, err := s.Encode(in)
	if err != nil {
		return err
	}
	out, err := s.Decode(wire)
	if err != nil {
		return err
	}
	a, err := compat.Canonical(in)
	if err != nil {
		return err
	}
	b, err := compat.Canonical(out)
	if err != nil {
		return err
	}
	if string(a) != string(b) {
		return fmt.Errorf("JSON → Avro → JSON changed the event: %s", b)
	}
	return nil
}
