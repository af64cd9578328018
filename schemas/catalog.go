package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

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
	Versions      []int  `json:"-"`             // every version with a schema file, ascending
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
	e, err := c.Lookup(typ)
	if err != nil {
		return err
	}
	s, ok := c.schemas[schemaID{typ, version}]
	if !ok {
		return fmt.Errorf("%w: %s v%d (known: %v)", ErrUnknownVersion, typ, version, e.Versions)
	}
	doc, ok := parseFast(event)
	if ok && s.fast != nil && s.fast.accepts(doc) {
		return nil
	}
	if !ok {
		dec := json.NewDecoder(bytes.NewReader(event))
		dec.UseNumber() // keep integers exact for integer/minimum rules
		if err := dec.Decode(&doc); err != nil {
			return &ValidationError{Pointer: "", Rule: "json", Message: err.Error()}
		}
	}
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

// ValidationError says which part of an event broke which rule.
type ValidationError struct {
	EventType    string
	EventVersion int
	Pointer      string // JSON pointer into the event, "" for the root
	Rule         string // the schema keyword that failed, e.g. required, minimum, format
	Message      string
}

func (e *ValidationError) Error() string {
	ptr := e.Pointer
	if ptr == "" {
		ptr = "/"
	}
	if e.EventType != "" {
		return fmt.Sprintf("%s v%d: %s: %s: %s", e.EventType, e.EventVersion, ptr, e.Rule, e.Message)
	}
	return fmt.Sprintf("%s: %s: %s", ptr, e.Rule, e.Message)
}

// newValidationError reduces jsonschema's error tree to one leaf: the
// failure an operator should fix first. jsonschema orders the causes of an
// object by map iteration, so "first leaf" would change from run to run
// when an event breaks several rules; the leaf with the shortest keyword
// location (the rule nearest the root of the schema, e.g. a wrong
// event_version const before anything inside data), ties broken by name,
// is the same every time.
func newValidationError(typ string, ver int, ve *jsonschema.ValidationError) *ValidationError {
	var leaf *jsonschema.ValidationError
	var visit func(e *jsonschema.ValidationError)
	visit = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			if leaf == nil || len(e.KeywordLocation) < len(leaf.KeywordLocation) ||
				(len(e.KeywordLocation) == len(leaf.KeywordLocation) && e.KeywordLocation < leaf.KeywordLocation) {
				leaf = e
			}
			return
		}
		for _, c := range e.Causes {
			visit(c)
		}
	}
	visit(ve)
	rule := leaf.KeywordLocation
	if i := strings.LastIndex(rule, "/"); i >= 0 {
		rule = rule[i+1:]
	}
	return &ValidationError{EventType: typ, EventVersion: ver, Pointer: leaf.InstanceLocation, Rule: rule, Message: leaf.Message}
}

// fastSchema is a compiled JSON Schema restricted to the keywords the
// catalog's schemas use (type, const, enum, format, required, properties,
// additionalProperties, items, minItems, maxItems, minLength, maxLength,
// pattern, minimum, maximum). jsonschema v5 allocates maps, closures,
// location strings and a big.Rat per number for every value it visits,
// which made validation the largest cost of consuming an event; fastSchema
// checks the same keywords without allocating.
//
// It only ever accepts. Each check is the library's or stricter (a number
// it cannot compare exactly, such as 1.0 against "integer", is treated as
// a failure), so an event it accepts is one jsonschema accepts; anything
// it rejects is validated again by jsonschema, whose verdict and error
// message stand. A schema using any other keyword gets no fastSchema.
type fastSchema struct {
	always     *bool // boolean schema: true accepts anything, false nothing
	types      []string
	constant   []any // one element when const is set (it may be null)
	enum       []any
	format     func(any) bool
	required   []string
	properties map[string]*fastSchema
	// additional is consulted for names not in properties: nil allows
	// them, a schema validates them.
	additional     *fastSchema
	noAdditional   bool // additionalProperties: false
	items          *fastSchema
	minItems       int // -1: unset, as in jsonschema.Schema
	maxItems       int
	minLength      int
	maxLength      int
	pattern        *regexp.Regexp
	minimum        *int64 // integer bounds only; others fall back
	maximum        *int64
	hasNumberBound bool // minimum/maximum that is not an int64: fall back
}

// compileFast builds the fastSchema of s, or returns nil when s (or a
// subschema) uses a keyword fastSchema does not check.
func compileFast(s *jsonschema.Schema) *fastSchema {
	if s == nil {
		return nil
	}
	if s.Ref != nil || s.RecursiveRef != nil || s.DynamicRef != nil || s.Not != nil ||
		len(s.AllOf) > 0 || len(s.AnyOf) > 0 || len(s.OneOf) > 0 || s.If != nil ||
		s.MinProperties != -1 || s.MaxProperties != -1 || s.PropertyNames != nil ||
		len(s.PatternProperties) > 0 || len(s.Dependencies) > 0 || len(s.DependentRequired) > 0 ||
		len(s.DependentSchemas) > 0 || s.UnevaluatedProperties != nil || s.UniqueItems ||
		s.Items != nil || s.AdditionalItems != nil || len(s.PrefixItems) > 0 || s.Contains != nil ||
		s.UnevaluatedItems != nil || s.ContentEncoding != "" || s.ContentMediaType != "" ||
		s.ContentSchema != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil ||
		s.MultipleOf != nil || len(s.Extensions) > 0 {
		return nil
	}
	f := &fastSchema{
		always: s.Always, types: s.Types, constant: s.Constant, enum: s.Enum, required: s.Required,
		minItems: s.MinItems, maxItems: s.MaxItems, minLength: s.MinLength, maxLength: s.MaxLength,
		pattern: s.Pattern,
	}
	if s.Format != "" {
		// The catalog's compiler registers no formats of its own and
		// asserts formats, so jsonschema checks Formats[name] and ignores
		// names it does not know, as this does.
		f.format = jsonschema.Formats[s.Format]
	}
	for _, b := range []struct {
		r   *big.Rat
		dst **int64
	}{{s.Minimum, &f.minimum}, {s.Maximum, &f.maximum}} {
		if b.r == nil {
			continue
		}
		if !b.r.IsInt() || !b.r.Num().IsInt64() {
			f.hasNumberBound = true
			continue
		}
		n := b.r.Num().Int64()
		*b.dst = &n
	}
	if len(s.Properties) > 0 {
		f.properties = make(map[string]*fastSchema, len(s.Properties))
		for name, ps := range s.Properties {
			if f.properties[name] = compileFast(ps); f.properties[name] == nil {
				return nil
			}
		}
	}
	switch ap := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		f.noAdditional = !ap
	case *jsonschema.Schema:
		if f.additional = compileFast(ap); f.additional == nil {
			return nil
		}
	default:
		return nil
	}
	if s.Items2020 != nil {
		if f.items = compileFast(s.Items2020); f.items == nil {
			return nil
		}
	}
	return f
}

// accepts reports whether v, a document decoded with UseNumber, certainly
// satisfies the schema. false means "ask jsonschema", not "invalid".
func (f *fastSchema) accepts(v any) bool {
	if f.always != nil {
		return *f.always
	}
	if f.hasNumberBound {
		return false
	}
	if len(f.types) > 0 && !f.typeMatches(v) {
		return false
	}
	if len(f.constant) > 0 && !fastEquals(v, f.constant[0]) {
		return false
	}
	if len(f.enum) > 0 {
		found := false
		for _, e := range f.enum {
			if fastEquals(v, e) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if f.format != nil && !f.format(v) {
		return false
	}
	switch v := v.(type) {
	case map[string]any:
		for _, name := range f.required {
			if _, ok := v[name]; !ok {
				return false
			}
		}
		for name, pv := range v {
			if ps, ok := f.properties[name]; ok {
				if !ps.accepts(pv) {
					return false
				}
				continue
			}
			if f.noAdditional || (f.additional != nil && !f.additional.accepts(pv)) {
				return false
			}
		}
	case []any:
		if (f.minItems != -1 && len(v) < f.minItems) || (f.maxItems != -1 && len(v) > f.maxItems) {
			return false
		}
		if f.items != nil {
			for _, item := range v {
				if !f.items.accepts(item) {
					return false
				}
			}
		}
	case string:
		if f.minLength != -1 || f.maxLength != -1 {
			n := utf8.RuneCountInString(v)
			if (f.minLength != -1 && n < f.minLength) || (f.maxLength != -1 && n > f.maxLength) {
				return false
			}
		}
		if f.pattern != nil && !f.pattern.MatchString(v) {
			return false
		}
	case json.Number:
		if f.minimum != nil || f.maximum != nil {
			n, ok := integerLiteral(v)
			if !ok || (f.minimum != nil && n < *f.minimum) || (f.maximum != nil && n > *f.maximum) {
				return false
			}
		}
	case nil, bool:
	default:
		return false // not something json decoding with UseNumber produces
	}
	return true
}

func (f *fastSchema) typeMatches(v any) bool {
	for _, t := range f.types {
		switch v := v.(type) {
		case nil:
			if t == "null" {
				return true
			}
		case bool:
			if t == "boolean" {
				return true
			}
		case string:
			if t == "string" {
				return true
			}
		case map[string]any:
			if t == "object" {
				return true
			}
		case []any:
			if t == "array" {
				return true
			}
		case json.Number:
			if t == "number" {
				return true
			}
			if _, ok := integerLiteral(v); ok && t == "integer" {
				return true
			}
		}
	}
	return false
}

// integerLiteral parses a JSON number written as an integer that fits in
// an int64. Others (1.0, 1e3, huge) report false and go to jsonschema,
// which decides them exactly.
func integerLiteral(n json.Number) (int64, bool) {
	if strings.ContainsAny(string(n), ".eE") {
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return i, err == nil
}

// fastEquals is jsonschema's equality for scalars written the same way;
// it reports false for anything else (compound values, numbers spelled
// differently), which sends the event to jsonschema.
func fastEquals(v, want any) bool {
	switch w := want.(type) {
	case string:
		s, ok := v.(string)
		return ok && s == w
	case json.Number:
		n, ok := v.(json.Number)
		return ok && n == w
	case bool:
		b, ok := v.(bool)
		return ok && b == w
	case nil:
		return v == nil
	}
	return false
}

// parseFast decodes a JSON document into the values encoding/json's
// Decoder produces with UseNumber (map[string]any, []any, string,
// json.Number, bool, nil) in one pass, where the Decoder scans the bytes
// once to find the value's end and again to decode it. It handles the
// common subset only: it reports false for invalid UTF-8, \u escapes of
// surrogates, nesting deeper than fastMaxDepth, anything after the value
// and any syntax error, and the caller then decodes with encoding/json,
// whose value or error stands. When it reports true, the value is the one
// encoding/json would have produced.
func parseFast(b []byte) (any, bool) {
	p := fastParser{b: b}
	v, ok := p.value(0)
	if !ok {
		return nil, false
	}
	p.ws()
	return v, p.i == len(p.b)
}

const fastMaxDepth = 100

type fastParser struct {
	b []byte
	i int
}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) value(depth int) (any, bool) {
	p.ws()
	if p.i >= len(p.b) || depth > fastMaxDepth {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *fastParser) literal(word string) bool {
	if !bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		return false
	}
	p.i += len(word)
	return true
}

func (p *fastParser) object(depth int) (any, bool) {
	p.i++ // {
	m := make(map[string]any)
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		k, ok := p.string()
		if !ok {
			return nil, false
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k.(string)] = v // a repeated name keeps the last value, as encoding/json does
		p.ws()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (p *fastParser) array(depth int) (any, bool) {
	p.i++ // [
	a := make([]any, 0)
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, true
	}
	for {
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		p.ws()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, true
		default:
			return nil, false
		}
	}
}

// string decodes a string at p.i (the opening quote). Strings without
// escapes are taken as they are after checking their UTF-8; escapes other
// than \u of a surrogate are decoded.
func (p *fastParser) string() (any, bool) {
	p.i++ // "
	start := p.i
	ascii := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false // encoding/json replaces bad bytes with U+FFFD
			}
			return string(s), true
		case c == '\\':
			return p.escaped(start)
		case c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return nil, false
}

// escaped finishes a string that has an escape at p.i.
func (p *fastParser) escaped(start int) (any, bool) {
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return nil, false
			}
			return string(out), true
		case c < 0x20:
			return nil, false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.b) {
			return nil, false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if p.i+4 > len(p.b) {
				return nil, false
			}
			r, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
			if err != nil || (r >= 0xD800 && r < 0xE000) {
				return nil, false // surrogates: leave pairing rules to encoding/json
			}
			out = utf8.AppendRune(out, rune(r))
			p.i += 4
		default:
			return nil, false
		}
	}
	return nil, false
}

// number checks JSON's number grammar and keeps the literal, as UseNumber
// does.
func (p *fastParser) number() (any, bool) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return json.Number(p.b[start:p.i]), true
}
