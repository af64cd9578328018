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
	registry := fl.String("registry", os.Getenv("SCHEMA_REGISTRY_URL"), "schema registry URL (env SCHEMA_REGISTRY_URL)")
	dryRun := fl.Bool("dry-run", false, "check compatibility and print the plan; register nothing")
	timeout := fl.Duration("timeout", time.Minute, "time limit for the whole push")
	if err := parse(fl, args); err != nil {
		return 0, err
	}
	if fl.NArg() != 0 {
		return 0, usagef("register takes no arguments")
	}
	if *registry == "" {
		return 0, usagef("register needs --registry URL")
	}
	dir, err := moduleDir(*dirFlag)
	if err != nil {
		return 0, err
	}
	cat, err := schemas.Load(os.DirFS(dir))
	if err != nil {
		return 0, fmt.Errorf("load catalog (run schemactl lint): %w", err)
	}
	cl, err := sr.NewClient(sr.URLs(*registry))
	if err != nil {
		return 0, usageError{fmt.Errorf("registry client: %w", err)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	plan, err := registryPlan(cat)
	if err != nil {
		return 0, err
	}
	return push(ctx, cl, plan, *dryRun, stdout)
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
// Subjects follow the topic-name strategy, <topic>-value. A subject holds
// one schema lineage, so a topic carrying several event types gives each
// type <topic>-<type> (the topic-record strategy) instead. Avro-encoded
// types push their .avsc twins; JSON types push their JSON Schemas with the
// envelope's event_version constant widened to an integer, because each
// version of a subject must accept the events of the others.
func registryPlan(cat *schemas.Catalog) ([]subjectPush, error) {
	perTopic := map[string]int{}
	for _, typ := range cat.Types() {
		e, _ := cat.Lookup(typ)
		perTopic[e.Topic]++
	}
	var plan []subjectPush
	for _, typ := range cat.Types() {
		e, _ := cat.Lookup(typ)
		p := subjectPush{subject: e.Topic + "-value", typ: typ}
		if perTopic[e.Topic] > 1 {
			p.subject = e.Topic + "-" + typ
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

// push sets each subject's level, checks each version against the latest
// registered one and registers it. Under --dry-run it only checks; a
// subject the registry does not know yet is reported as new.
func push(ctx context.Context, cl *sr.Client, plan []subjectPush, dryRun bool, out io.Writer) (int, error) {
	problems := 0
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
				fmt.Fprintf(out, "%s: %s v%d: INCOMPATIBLE_WITH_REGISTRY under %s: %v\n", p.subject, p.typ, v, p.level, res.Messages)
				break
			}
			if dryRun {
				fmt.Fprintf(out, "%s: %s v%d (%s, %s): compatible, would register\n", p.subject, p.typ, v, s.Type, p.level)
				continue
			}
			ss, err := cl.CreateSchema(ctx, p.subject, s)
			if err != nil {
				return problems, fmt.Errorf("register %s (%s v%d): %w", p.subject, p.typ, v, err)
			}
			fmt.Fprintf(out, "%s: %s v%d (%s, %s): registered as id %d, subject version %d\n", p.subject, p.typ, v, s.Type, p.level, ss.ID, ss.Version)
		}
	}
	return problems, nil
}
