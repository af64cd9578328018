package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/concordhq/concord/schemas"
)

func runRegister(args []string, stdout, stderr io.Writer) (int, error) {
	fl := newFlags("register", stdout)
	dirFlag := addDirFlag(fl)
	reg := addRegistryFlags(fl)
	dryRun := fl.Bool("dry-run", false, "check compatibility and print the plan; register nothing")
	timeout := fl.Duration("timeout", time.Minute, "time limit for the whole push")
	format := fl.String("format", "text", "output format: text, or json (one JSON object per subject version)")
	if err := parse(fl, args); err != nil {
		return 0, err
	}
	if fl.NArg() != 0 {
		return 0, usagef("register takes no arguments")
	}
	if *format != "text" && *format != "json" {
		return 0, usagef("unknown --format %q (want text or json)", *format)
	}
	cl, err := reg.client()
	if err != nil {
		return 0, err
	}
	dir, err := moduleDir(*dirFlag)
	if err != nil {
		return 0, err
	}
	cat, err := schemas.Load(os.DirFS(dir))
	if err != nil {
		return 0, fmt.Errorf("load catalog (run schemactl lint): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	plan, err := registryPlan(cat)
	if err != nil {
		return 0, err
	}
	return push(ctx, cl, plan, *dryRun, *format == "json", stdout)
}

// subjectPush is one subject and the schemas of its versions, oldest first.
type subjectPush struct {
	subject string
	typ     string
	level   sr.CompatibilityLevel
	schemas []sr.Schema
}

// registryPlan names each type's subject and builds the schemas to push.
//
// Subjects follow the entry's subject name strategy as Confluent's
// serializers compute it (schemas.Catalog.Subject): <topic>-value,
// <record name> or <topic>-<record name>, the record name being the JSON
// Schema's title or the Avro twin's full name. Avro-encoded types push
// their .avsc twins; JSON types push their JSON Schemas with the
// envelope's event_version constant widened to an integer, because each
// version of a subject must accept the events of the others.
func registryPlan(cat *schemas.Catalog) ([]subjectPush, error) {
	var plan []subjectPush
	for _, typ := range cat.Types() {
		e, _ := cat.Lookup(typ)
		p := subjectPush{typ: typ}
		for _, v := range e.Versions {
			subject, err := cat.Subject(typ, v)
			if err != nil {
				return nil, fmt.Errorf("subject of %s (run schemactl lint): %w", typ, err)
			}
			if p.subject != "" && subject != p.subject {
				return nil, fmt.Errorf("%s: v%d belongs in subject %q, earlier versions in %q (run schemactl lint)", typ, v, subject, p.subject)
			}
			p.subject = subject
		}
		if err := p.level.UnmarshalText([]byte(e.Compatibility)); err != nil {
			return nil, fmt.Errorf("%s: compatibility %q: %w", typ, e.Compatibility, err)
		}
		for _, v := range e.Versions {
			s, err := registrySchema(cat, e, v)
			if err != nil {
				return nil, err
			}
			p.schemas = append(p.schemas, s)
		}
		plan = append(plan, p)
	}
	return plan, nil
}

func registrySchema(cat *schemas.Catalog, e schemas.Entry, v int) (sr.Schema, error) {
	if e.Encoding == schemas.EncodingAvro {
		file := fmt.Sprintf("events/%s/v%d.avsc", e.Type, v)
		b, err := readFile(cat, file)
		if err != nil {
			return sr.Schema{}, err
		}
		return sr.Schema{Schema: string(b), Type: sr.TypeAvro}, nil
	}
	file := fmt.Sprintf("events/%s/v%d.schema.json", e.Type, v)
	b, err := readFile(cat, file)
	if err != nil {
		return sr.Schema{}, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return sr.Schema{}, fmt.Errorf("%s: %w", file, err)
	}
	if props, ok := doc["properties"].(map[string]any); ok {
		props["event_version"] = map[string]any{"type": "integer", "minimum": 1}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return sr.Schema{}, err
	}
	return sr.Schema{Schema: string(out), Type: sr.TypeJSON}, nil
}

func readFile(cat *schemas.Catalog, file string) ([]byte, error) {
	b, err := fs.ReadFile(cat.Files(), file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	return b, nil
}

// pushResult is one subject version's outcome, printed as a line of text
// or, under --format json, as one JSON object.
type pushResult struct {
	Subject        string   `json:"subject"`
	EventType      string   `json:"event_type"`
	EventVersion   int      `json:"event_version"`
	SchemaType     string   `json:"schema_type"`
	Compatibility  string   `json:"compatibility"`
	Status         string   `json:"status"` // registered, would_register or incompatible
	ID             int      `json:"id,omitempty"`
	SubjectVersion int      `json:"subject_version,omitempty"`
	Messages       []string `json:"messages,omitempty"`
}

func (r pushResult) text() string {
	switch r.Status {
	case "incompatible":
		return fmt.Sprintf("%s: %s v%d: INCOMPATIBLE_WITH_REGISTRY under %s: %v", r.Subject, r.EventType, r.EventVersion, r.Compatibility, r.Messages)
	case "would_register":
		return fmt.Sprintf("%s: %s v%d (%s, %s): compatible, would register", r.Subject, r.EventType, r.EventVersion, r.SchemaType, r.Compatibility)
	}
	return fmt.Sprintf("%s: %s v%d (%s, %s): registered as id %d, subject version %d", r.Subject, r.EventType, r.EventVersion, r.SchemaType, r.Compatibility, r.ID, r.SubjectVersion)
}

// push sets each subject's level, checks each version against the latest
// registered one and registers it. Under --dry-run it only checks; a
// subject the registry does not know yet is reported as new.
func push(ctx context.Context, cl *sr.Client, plan []subjectPush, dryRun, asJSON bool, out io.Writer) (int, error) {
	problems := 0
	emit := func(r pushResult) {
		if asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(out, string(b))
			return
		}
		fmt.Fprintln(out, r.text())
	}
	for _, p := range plan {
		if !dryRun {
			for _, r := range cl.SetCompatibility(ctx, sr.SetCompatibility{Level: p.level}, p.subject) {
				if r.Err != nil {
					return problems, fmt.Errorf("set compatibility of %s: %w", p.subject, r.Err)
				}
			}
		}
		for i, s := range p.schemas {
			v := i + 1
			r := pushResult{Subject: p.subject, EventType: p.typ, EventVersion: v, SchemaType: s.Type.String(), Compatibility: p.level.String()}
			res, err := cl.CheckCompatibility(ctx, p.subject, -1, s)
			var re *sr.ResponseError
			switch {
			case errors.As(err, &re) && (re.ErrorCode == sr.ErrSubjectNotFound.Code || re.ErrorCode == sr.ErrVersionNotFound.Code):
				res.Is = true // nothing registered yet
			case err != nil:
				return problems, fmt.Errorf("check %s (%s v%d): %w", p.subject, p.typ, v, err)
			}
			if !res.Is {
				problems++
				r.Status, r.Messages = "incompatible", res.Messages
				emit(r)
				break
			}
			if dryRun {
				r.Status = "would_register"
				emit(r)
				continue
			}
			ss, err := cl.CreateSchema(ctx, p.subject, s)
			if err != nil {
				return problems, fmt.Errorf("register %s (%s v%d): %w", p.subject, p.typ, v, err)
			}
			r.Status, r.ID, r.SubjectVersion = "registered", ss.ID, ss.Version
			emit(r)
		}
	}
	return problems, nil
}
