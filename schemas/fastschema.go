package schemas

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

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
