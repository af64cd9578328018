package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// registryVerb holds what get, list and delete share: connection flags,
// output format and a time limit.
type registryVerb struct {
	reg     *registryFlags
	format  *string
	timeout *time.Duration
}

func addRegistryVerbFlags(name string, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (*registryVerb, []string, error) {
	fl := newFlags(name, stderr)
	v := &registryVerb{
		reg:     addRegistryFlags(fl),
		format:  fl.String("format", "text", "output format: text, or json (one JSON object per line)"),
		timeout: fl.Duration("timeout", 30*time.Second, "time limit for the registry requests"),
	}
	if extra != nil {
		extra(fl)
	}
	if err := parse(fl, args); err != nil {
		return nil, nil, err
	}
	if *v.format != "text" && *v.format != "json" {
		return nil, nil, usagef("unknown --format %q (want text or json)", *v.format)
	}
	return v, fl.Args(), nil
}

// out writes one result: its text line, or the value as one JSON line.
func (v *registryVerb) out(w io.Writer, text string, value any) {
	if *v.format == "json" {
		b, _ := json.Marshal(value)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintln(w, text)
}

// notFound reports whether the registry answered that the subject or
// version does not exist: a finding (exit 1), not a usage error.
func notFound(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && (re.ErrorCode == sr.ErrSubjectNotFound.Code || re.ErrorCode == sr.ErrVersionNotFound.Code ||
		re.ErrorCode == sr.ErrSchemaNotFound.Code || re.StatusCode == 404)
}

// parseVersion reads a subject version: a positive number or "latest".
func parseVersion(s string) (int, error) {
	if s == "latest" || s == "" {
		return -1, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, usagef("version %q: want a positive number or latest", s)
	}
	return v, nil
}

// registered is how get prints a schema in JSON.
type registered struct {
	Subject    string               `json:"subject"`
	Version    int                  `json:"version"`
	ID         int                  `json:"id"`
	SchemaType string               `json:"schema_type"`
	Schema     json.RawMessage      `json:"schema"`
	References []sr.SchemaReference `json:"references,omitempty"`
}

// runGet prints one version of a subject.
func runGet(args []string, stdout, stderr io.Writer) (int, error) {
	var deleted *bool
	v, rest, err := addRegistryVerbFlags("get", args, stderr, func(fl *flag.FlagSet) {
		deleted = fl.Bool("deleted", false, "also find soft-deleted versions")
	})
	if err != nil {
		return 0, err
	}
	if len(rest) < 1 || len(rest) > 2 {
		return 0, usagef("get takes SUBJECT [VERSION|latest]")
	}
	version := -1
	if len(rest) == 2 {
		if version, err = parseVersion(rest[1]); err != nil {
			return 0, err
		}
	}
	cl, err := v.reg.client()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *v.timeout)
	defer cancel()
	if *deleted {
		ctx = sr.WithParams(ctx, sr.ShowDeleted)
	}
	ss, err := cl.SchemaByVersion(ctx, rest[0], version)
	if notFound(err) {
		fmt.Fprintf(stderr, "schemactl get: %s version %s: not found\n", rest[0], versionName(version))
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("get %s: %w", rest[0], err)
	}
	schema := json.RawMessage(ss.Schema.Schema)
	if !json.Valid(schema) {
		b, _ := json.Marshal(ss.Schema.Schema) // a Protobuf schema is text
		schema = b
	}
	v.out(stdout, fmt.Sprintf("%s version %d (id %d, %s)\n%s", ss.Subject, ss.Version, ss.ID, ss.Type, ss.Schema.Schema),
		registered{ss.Subject, ss.Version, ss.ID, ss.Type.String(), schema, ss.References})
	return 0, nil
}

func versionName(v int) string {
	if v < 0 {
		return "latest"
	}
	return strconv.Itoa(v)
}

// runList prints the subjects, or the versions of one subject.
func runList(args []string, stdout, stderr io.Writer) (int, error) {
	var deleted *bool
	var prefix *string
	v, rest, err := addRegistryVerbFlags("list", args, stderr, func(fl *flag.FlagSet) {
		deleted = fl.Bool("deleted", false, "include soft-deleted subjects or versions")
		prefix = fl.String("prefix", "", "only subjects that start with this prefix")
	})
	if err != nil {
		return 0, err
	}
	if len(rest) > 1 {
		return 0, usagef("list takes at most one SUBJECT")
	}
	cl, err := v.reg.client()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *v.timeout)
	defer cancel()
	var params []sr.Param
	if *deleted {
		params = append(params, sr.ShowDeleted)
	}
	if len(rest) == 0 && *prefix != "" {
		params = append(params, sr.SubjectPrefix(*prefix))
	}
	ctx = sr.WithParams(ctx, params...)
	if len(rest) == 1 {
		versions, err := cl.SubjectVersions(ctx, rest[0])
		if notFound(err) {
			fmt.Fprintf(stderr, "schemactl list: subject %s: not found\n", rest[0])
			return 1, nil
		}
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", rest[0], err)
		}
		for _, n := range versions {
			v.out(stdout, fmt.Sprintf("%s %d", rest[0], n), struct {
				Subject string `json:"subject"`
				Version int    `json:"version"`
			}{rest[0], n})
		}
		return 0, nil
	}
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		return 0, fmt.Errorf("list subjects: %w", err)
	}
	for _, s := range subjects {
		v.out(stdout, s, struct {
			Subject string `json:"subject"`
		}{s})
	}
	return 0, nil
}

// runDelete deletes a subject or one of its versions: softly (the
// registry keeps it, hidden, and its ids still resolve), or with
// --permanent for good. Confluent's registry refuses a permanent delete of
// what is not soft-deleted yet, so --permanent soft-deletes first.
func runDelete(args []string, stdout, stderr io.Writer) (int, error) {
	var permanent *bool
	v, rest, err := addRegistryVerbFlags("delete", args, stderr, func(fl *flag.FlagSet) {
		permanent = fl.Bool("permanent", false, "delete for good (hard delete), after the soft delete the registry requires")
	})
	if err != nil {
		return 0, err
	}
	if len(rest) < 1 || len(rest) > 2 {
		return 0, usagef("delete takes SUBJECT [VERSION|latest]")
	}
	subject, version, whole := rest[0], -1, len(rest) == 1
	if !whole {
		if version, err = parseVersion(rest[1]); err != nil {
			return 0, err
		}
	}
	cl, err := v.reg.client()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *v.timeout)
	defer cancel()
	var versions []int
	del := func(how sr.DeleteHow) error {
		if whole {
			vs, err := cl.DeleteSubject(ctx, subject, how)
			if len(vs) > 0 {
				versions = vs
			}
			return err
		}
		if version < 0 {
			// Resolve "latest" once, so the hard delete removes the version
			// the soft delete hid rather than the next one.
			ss, err := cl.SchemaByVersion(ctx, subject, -1)
			if err != nil {
				return err
			}
			version = ss.Version
		}
		versions = []int{version}
		return cl.DeleteSchema(ctx, subject, version, how)
	}
	err = del(sr.SoftDelete)
	if *permanent && (err == nil || alreadySoftDeleted(err)) {
		err = del(sr.HardDelete)
	}
	if notFound(err) {
		fmt.Fprintf(stderr, "schemactl delete: %s: not found\n", subject)
		return 1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("delete %s: %w", subject, err)
	}
	kind := "soft"
	if *permanent {
		kind = "permanent"
	}
	v.out(stdout, fmt.Sprintf("%s: deleted versions %v (%s)", subject, versions, kind), struct {
		Subject   string `json:"subject"`
		Versions  []int  `json:"versions"`
		Permanent bool   `json:"permanent"`
	}{subject, versions, *permanent})
	return 0, nil
}

// alreadySoftDeleted reports the registry's answer to soft-deleting what
// is soft-deleted already, after which a permanent delete may proceed.
func alreadySoftDeleted(err error) bool {
	var re *sr.ResponseError
	return errors.As(err, &re) && (re.ErrorCode == sr.ErrSubjectSoftDeleted.Code || re.ErrorCode == sr.ErrSchemaVersionSoftDeleted.Code)
}
