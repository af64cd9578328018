package schemas

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/concordhq/concord/infra/jsonscan"
)

// acceptsEncoded is fastSchema.accepts run over the JSON bytes directly,
// without decoding them into maps, slices and strings first: decoding a
// 1 KiB event into those values cost as much as the rest of consuming it.
// It accepts only what parseFast decodes into a value fastSchema accepts,
// and is stricter still: any escape in a string, a member name or a
// format on a value that is not a string reports false, as does a
// repeated member name whose earlier value breaks the schema. false means
// "decode and ask again", never "invalid".
func (f *fastSchema) acceptsEncoded(b []byte) bool {
	v := fastValidator{fastParser{b: b}}
	if !v.value(f, 0) {
		return false
	}
	v.ws()
	return v.i == len(v.b)
}

// fastValidator walks JSON bytes, checking each value against the schema
// it falls under (nil: syntax only).
type fastValidator struct {
	fastParser
}

// value consumes one value and reports whether it is well formed and f
// certainly accepts it.
func (v *fastValidator) value(f *fastSchema, depth int) bool {
	v.ws()
	if v.i >= len(v.b) || depth > fastMaxDepth {
		return false
	}
	if f != nil {
		if f.always != nil && !*f.always {
			return false
		}
		if f.always != nil || f.hasNumberBound {
			// true accepts anything well formed; number bounds that are
			// not integers are left to jsonschema.
			if f.hasNumberBound {
				return false
			}
			f = nil
		}
	}
	switch c := v.b[v.i]; {
	case c == '{':
		return v.object(f, depth)
	case c == '[':
		return v.array(f, depth)
	case c == '"':
		s, ok := v.plainString()
		return ok && (f == nil || f.acceptsString(s))
	case c == '-' || (c >= '0' && c <= '9'):
		n, ok := v.numberLiteral()
		return ok && (f == nil || f.acceptsNumber(n))
	case c == 't':
		return v.literal("true") && (f == nil || f.acceptsScalar(true))
	case c == 'f':
		return v.literal("false") && (f == nil || f.acceptsScalar(false))
	case c == 'n':
		return v.literal("null") && (f == nil || f.acceptsScalar(nil))
	}
	return false
}

// plainString consumes a string without escapes or control characters,
// in valid UTF-8, and returns its contents.
func (v *fastValidator) plainString() ([]byte, bool) {
	v.i++ // "
	start, ascii := v.i, true
	for v.i = jsonscan.PlainEnd(v.b, v.i); v.i < len(v.b); v.i = jsonscan.PlainEnd(v.b, v.i+1) {
		switch c := v.b[v.i]; {
		case c == '"':
			s := v.b[start:v.i]
			v.i++
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		default: // 0x80 and above
			ascii = false
		}
	}
	return nil, false
}

// numberLiteral consumes a number in JSON's grammar and returns its
// literal.
func (v *fastValidator) numberLiteral() ([]byte, bool) {
	start := v.i
	end, ok := numberEnd(v.b, v.i)
	v.i = end
	return v.b[start:end], ok
}

func (v *fastValidator) object(f *fastSchema, depth int) bool {
	if f != nil && !f.allowsType("object") {
		return false
	}
	if f != nil && (len(f.constant) > 0 || len(f.enum) > 0 || f.format != nil || len(f.required) > 64) {
		return false // fastEquals never matches an object; formats see strings
	}
	var seen uint64 // bit i: f.required[i] was present
	v.i++           // {
	v.ws()
	if v.i < len(v.b) && v.b[v.i] == '}' {
		v.i++
		return f == nil || len(f.required) == 0
	}
	for {
		v.ws()
		if v.i >= len(v.b) || v.b[v.i] != '"' {
			return false
		}
		name, ok := v.plainString()
		if !ok {
			return false
		}
		v.ws()
		if v.i >= len(v.b) || v.b[v.i] != ':' {
			return false
		}
		v.i++
		var sub *fastSchema
		if f != nil {
			for i, r := range f.required {
				if r == string(name) {
					seen |= 1 << i
				}
			}
			if ps, ok := f.properties[string(name)]; ok {
				sub = ps
			} else if f.noAdditional {
				return false
			} else {
				sub = f.additional
			}
		}
		if !v.value(sub, depth+1) {
			return false
		}
		if more, ok := v.next('}'); !ok {
			return false
		} else if !more {
			return f == nil || seen == 1<<len(f.required)-1
		}
	}
}

func (v *fastValidator) array(f *fastSchema, depth int) bool {
	if f != nil && (!f.allowsType("array") || len(f.constant) > 0 || len(f.enum) > 0 || f.format != nil) {
		return false
	}
	var items *fastSchema
	if f != nil {
		items = f.items
	}
	n := 0
	v.i++ // [
	v.ws()
	if v.i < len(v.b) && v.b[v.i] == ']' {
		v.i++
		return f == nil || f.countAllowed(0)
	}
	for {
		if !v.value(items, depth+1) {
			return false
		}
		n++
		if more, ok := v.next(']'); !ok {
			return false
		} else if !more {
			return f == nil || f.countAllowed(n)
		}
	}
}

// next consumes what follows a member or an element: a comma, when more
// follow, or closer.
func (v *fastValidator) next(closer byte) (more, ok bool) {
	v.ws()
	if v.i >= len(v.b) {
		return false, false
	}
	switch v.b[v.i] {
	case ',':
		v.i++
		return true, true
	case closer:
		v.i++
		return false, true
	}
	return false, false
}

// allowsType reports whether f's type keyword (if any) names typ, for the
// kinds whose JSON type is known from their first byte.
func (f *fastSchema) allowsType(typ string) bool {
	if len(f.types) == 0 {
		return true
	}
	for _, t := range f.types {
		if t == typ {
			return true
		}
	}
	return false
}

func (f *fastSchema) countAllowed(n int) bool {
	return (f.minItems == -1 || n >= f.minItems) && (f.maxItems == -1 || n <= f.maxItems)
}

// acceptsString is accepts for a string value, given its unescaped bytes.
func (f *fastSchema) acceptsString(s []byte) bool {
	if !f.allowsType("string") {
		return false
	}
	if len(f.constant) > 0 {
		if w, ok := f.constant[0].(string); !ok || w != string(s) {
			return false
		}
	}
	if len(f.enum) > 0 && !slices.ContainsFunc(f.enum, func(e any) bool { w, ok := e.(string); return ok && w == string(s) }) {
		return false
	}
	if f.minLength != -1 || f.maxLength != -1 {
		n := utf8.RuneCount(s)
		if (f.minLength != -1 && n < f.minLength) || (f.maxLength != -1 && n > f.maxLength) {
			return false
		}
	}
	if f.pattern != nil && !f.pattern.Match(s) {
		return false
	}
	return f.format == nil || f.format(string(s))
}

// acceptsNumber is accepts for a number, given its literal.
func (f *fastSchema) acceptsNumber(lit []byte) bool {
	if f.format != nil {
		return false
	}
	if len(f.types) > 0 && !f.allowsType("number") {
		if _, ok := integerBytes(lit); !ok || !f.allowsType("integer") {
			return false
		}
	}
	same := func(e any) bool { w, ok := e.(json.Number); return ok && string(w) == string(lit) }
	if len(f.constant) > 0 && !same(f.constant[0]) {
		return false
	}
	if len(f.enum) > 0 && !slices.ContainsFunc(f.enum, same) {
		return false
	}
	if f.minimum != nil || f.maximum != nil {
		i, ok := integerBytes(lit)
		if !ok || (f.minimum != nil && i < *f.minimum) || (f.maximum != nil && i > *f.maximum) {
			return false
		}
	}
	return true
}

// integerBytes is integerLiteral of a literal still in its bytes.
func integerBytes(lit []byte) (int64, bool) {
	if bytes.ContainsAny(lit, ".eE") {
		return 0, false
	}
	i, err := strconv.ParseInt(string(lit), 10, 64)
	return i, err == nil
}

// acceptsScalar is accepts for true, false and null.
func (f *fastSchema) acceptsScalar(v any) bool {
	if f.format != nil || (len(f.types) > 0 && !f.typeMatches(v)) {
		return false
	}
	if len(f.constant) > 0 && !fastEquals(v, f.constant[0]) {
		return false
	}
	return len(f.enum) == 0 || slices.ContainsFunc(f.enum, func(e any) bool { return fastEquals(v, e) })
}
