package schemas

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

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
	end, ok := numberEnd(p.b, p.i)
	p.i = end
	if !ok {
		return nil, false
	}
	return json.Number(p.b[start:end]), true
}

// numberEnd returns where the number starting at b[i] ends, and whether
// it follows JSON's grammar.
func numberEnd(b []byte, i int) (int, bool) {
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if digits() == 0 {
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return i, false
		}
	}
	return i, true
}
