package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Encodings a catalog entry may name.
const (
	EncodingJSON = "json"
	EncodingAvro = "avro"
)

// Compatibility modes, with the meanings Confluent Schema Registry gives them.
const (
	Backward           = "BACKWARD"
	BackwardTransitive = "BACKWARD_TRANSITIVE"
	Forward            = "FORWARD"
	ForwardTransitive  = "FORWARD_TRANSITIVE"
	Full               = "FULL"
	FullTransitive     = "FULL_TRANSITIVE"
	None               = "NONE"
)

// Errors callers branch on.
var (
	ErrUnknownType    = errors.New("unknown event type")
	ErrUnknownVersion = errors.New("unknown event version")
)

// Entry is one event type of the catalog.
type Entry struct {
	Type          string `json:"-"`
	AggregateType string `json:"aggregate_type"` // the aggregate its events belong to; the type's prefix when empty
	Topic         string `json:"topic"`
	KeyField      string `json:"key_field"`     // field of data whose value is the partition key
	Encoding      string `json:"encoding"`      // json or avro
	Compatibility string `json:"compatibility"` // BACKWARD when empty
	// SubjectStrategy names the registry subject of the type's schemas
	// (TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy;
	// TopicNameStrategy when empty). The record strategies take the record
	// name from each JSON Schema's title (an Avro twin's full name).
	SubjectStrategy string `json:"subject_strategy,omitempty"`
	Versions        []int  `json:"-"` // every version with a schema file, ascending
}

// Latest is the newest version of the type; producers emit it by default.
func (e Entry) Latest() int { return e.Versions[len(e.Versions)-1] }

// Catalog is the compiled event contract. It is safe for concurrent use.
type Catalog struct {
	entries map[string]Entry
	schemas map[schemaID]compiled
	files   fs.FS
}

var (
	defaultOnce sync.Once
	defaultCat  *Catalog
	defaultErr  error
)

// Default returns the catalog embedded in the binary, compiled once.
func Default() (*Catalog, error) {
	defaultOnce.Do(func() { defaultCat, defaultErr = Load(files) })
	return defaultCat, defaultErr
}

// MustDefault is Default for program start-up and tests: the embedded
// catalog is checked by the test suite, so an error here is a build defect.
func MustDefault() *Catalog {
	c, err := Default()
	if err != nil {
		panic(err)
	}
	return c
}

var versionFile = regexp.MustCompile(`^v([1-9][0-9]*)\.schema\.json$`)

// Load reads and compiles a catalog from fsys, which holds events/catalog.json
// and events/<type>/v<N>.schema.json files (the layout of this module).
func Load(fsys fs.FS) (*Catalog, error) {
	raw, err := fs.ReadFile(fsys, "events/catalog.json")
	if err != nil {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	var entries map[string]Entry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("parse events/catalog.json: %w", err)
	}
	c := &Catalog{entries: map[string]Entry{}, schemas: map[schemaID]compiled{}, files: fsys}
	compiler := jsonschema.NewCompiler()
	compiler.Draft = jsonschema.Draft2020
	compiler.AssertFormat = true
	for typ, e := range entries {
		e.Type = typ
		if e.Encoding == "" {
			e.Encoding = EncodingJSON
		}
		if e.Compatibility == "" {
			e.Compatibility = Backward
		}
		strategy, err := ParseSubjectStrategy(e.SubjectStrategy)
		if err != nil {
			return nil, fmt.Errorf("catalog entry %s: %w", typ, err)
		}
		e.SubjectStrategy = strategy
		if e.AggregateType == "" {
			e.AggregateType, _, _ = strings.Cut(typ, ".")
		}
		if e.Topic == "" || e.KeyField == "" {
			return nil, fmt.Errorf("catalog entry %s: topic and key_field are required", typ)
		}
		dir := path.Join("events", typ)
		des, err := fs.ReadDir(fsys, dir)
		if err != nil {
			return nil, fmt.Errorf("catalog entry %s: %w", typ, err)
		}
		for _, de := range des {
			m := versionFile.FindStringSubmatch(de.Name())
			if m == nil {
				continue
			}
			v, _ := strconv.Atoi(m[1])
			e.Versions = append(e.Versions, v)
			file := path.Join(dir, de.Name())
			b, err := fs.ReadFile(fsys, file)
			if err != nil {
				return nil, err
			}
			if err := compiler.AddResource(file, bytes.NewReader(b)); err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			s, err := compiler.Compile(file)
			if err != nil {
				return nil, fmt.Errorf("compile %s: %w", file, err)
			}
			c.schemas[schemaID{typ, v}] = compiled{full: s, fast: compileFast(s)}
		}
		if len(e.Versions) == 0 {
			return nil, fmt.Errorf("catalog entry %s: no v<N>.schema.json in %s", typ, dir)
		}
		sort.Ints(e.Versions)
		c.entries[typ] = e
	}
	return c, nil
}

// schemaID names one schema of the catalog; a struct key spares building
// a "type/vN" string on every validation.
type schemaID struct {
	typ string
	v   int
}

// compiled is one schema twice: full is jsonschema's, whose verdict and
// errors are authoritative; fast, when the schema uses only keywords
// fastSchema covers, accepts valid events without allocating (see
// fastSchema).
type compiled struct {
	full *jsonschema.Schema
	fast *fastSchema // nil: always use full
}

// Lookup returns the catalog entry of an event type.
func (c *Catalog) Lookup(typ string) (Entry, error) {
	e, ok := c.entries[typ]
	if !ok {
		return Entry{}, fmt.Errorf("%w %q", ErrUnknownType, typ)
	}
	return e, nil
}

// Types lists the event types of the catalog, sorted.
func (c *Catalog) Types() []string {
	out := make([]string, 0, len(c.entries))
	for t := range c.entries {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Files is the file system the catalog was loaded from (for examples and
// Avro twins).
func (c *Catalog) Files() fs.FS { return c.files }

// Validate checks a JSON-encoded envelope against the schema of its
// event_type and event_version. Failures are *ValidationError (naming the
// JSON pointer and the rule) or wrap ErrUnknownType / ErrUnknownVersion.
func (c *Catalog) Validate(envelope []byte) error {
	var head struct {
		EventType    string `json:"event_type"`
		EventVersion any    `json:"event_version"`
	}
	if err := json.Unmarshal(envelope, &head); err != nil {
		return &ValidationError{Pointer: "", Rule: "json", Message: err.Error()}
	}
	e, err := c.Lookup(head.EventType)
	if err != nil {
		return err
	}
	ver, ok := head.EventVersion.(float64)
	if !ok || ver != float64(int(ver)) {
		return &ValidationError{EventType: e.Type, Pointer: "/event_version", Rule: "type", Message: "event_version must be an integer"}
	}
	return c.ValidateAs(e.Type, int(ver), envelope)
}

// ValidateAs checks a JSON-encoded event against one explicit schema version,
// whatever the event says of itself (schema review uses it to run old examples
// against new versions).
func (c *Catalog) ValidateAs(typ string, version int, event []byte) error {
	s, err := c.schema(typ, version)
	if err != nil {
		return err
	}
	if s.fast != nil && s.fast.acceptsEncoded(event) {
		return nil
	}
	doc, parsed, accepted := s.acceptsFast(event)
	if accepted {
		return nil
	}
	if !parsed {
		if doc, err = decodeDocument(event); err != nil {
			return err
		}
	}
	return s.validate(typ, version, doc)
}

// validateSlow is ValidateAs without its fast path: the event decoded by
// encoding/json and judged by jsonschema alone. Tests hold the fast path
// to it.
func (c *Catalog) validateSlow(typ string, version int, event []byte) error {
	s, err := c.schema(typ, version)
	if err != nil {
		return err
	}
	doc, err := decodeDocument(event)
	if err != nil {
		return err
	}
	return s.validate(typ, version, doc)
}

// schema returns the compiled schema of one version of a type.
func (c *Catalog) schema(typ string, version int) (compiled, error) {
	e, err := c.Lookup(typ)
	if err != nil {
		return compiled{}, err
	}
	s, ok := c.schemas[schemaID{typ, version}]
	if !ok {
		return compiled{}, fmt.Errorf("%w: %s v%d (known: %v)", ErrUnknownVersion, typ, version, e.Versions)
	}
	return s, nil
}

// acceptsFast is ValidateAs's second fast path, for what acceptsEncoded
// leaves (escaped strings, repeated names): accepted when parseFast decodes
// the event and fastSchema accepts the value, so jsonschema is not asked.
// doc and parsed are parseFast's result, which the slow path reuses.
func (s compiled) acceptsFast(event []byte) (doc any, parsed, accepted bool) {
	doc, parsed = parseFast(event)
	return doc, parsed, parsed && s.fast != nil && s.fast.accepts(doc)
}

// decodeDocument decodes an event as jsonschema expects it, for the
// events parseFast does not handle. Like the Decoder it uses, it reads
// the first JSON value and ignores what follows it; Validate rejects
// trailing bytes when it reads the event's type, and ValidateAs's callers
// pass envelopes already decoded or just encoded.
func decodeDocument(event []byte) (any, error) {
	var doc any
	dec := json.NewDecoder(bytes.NewReader(event))
	dec.UseNumber() // keep integers exact for integer/minimum rules
	if err := dec.Decode(&doc); err != nil {
		return nil, &ValidationError{Pointer: "", Rule: "json", Message: err.Error()}
	}
	return doc, nil
}

// validate is jsonschema's verdict on a decoded event, reduced to one
// *ValidationError.
func (s compiled) validate(typ string, version int, doc any) error {
	if err := s.full.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return newValidationError(typ, version, ve)
		}
		return err
	}
	return nil
}

// PartitionKey extracts the partition key named by the entry's key_field
// from an event's data.
func (e Entry) PartitionKey(data json.RawMessage) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return "", fmt.Errorf("%s: data is not a JSON object: %w", e.Type, err)
	}
	v, ok := m[e.KeyField]
	if !ok {
		return "", fmt.Errorf("%s: data has no key field %q", e.Type, e.KeyField)
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return "", fmt.Errorf("%s: key field %q must be a non-empty string", e.Type, e.KeyField)
	}
	return s, nil
}
