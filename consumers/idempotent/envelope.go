package idempotent

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/concordhq/concord/infra/jsonscan"
	"github.com/concordhq/concord/schemas"
)

// decodeEnvelope is schemas.DecodeEnvelope in one pass over the bytes for
// the envelopes producers write (exact lower-case names, strings without
// escapes, an integer version); encoding/json's Unmarshal scans a record
// once to check it and again to decode it, which made it the largest cost
// of consuming an event after validation. Anything else — an escape, a
// null, a name in another case, bad UTF-8, a syntax error, bytes after the
// object — is decoded by schemas.DecodeEnvelope, whose result or error
// stands, so the outcome is always the one encoding/json gives.
//
// Data aliases value instead of copying it: records are not reused once
// polled.
func decodeEnvelope(value []byte) (schemas.Envelope, error) {
	if env, ok := decodeEnvelopeFast(value); ok {
		return env, nil
	}
	return schemas.DecodeEnvelope(value)
}

func decodeEnvelopeFast(b []byte) (env schemas.Envelope, ok bool) {
	s := scan{b: b}
	s.ws()
	if !s.byte('{') {
		return env, false
	}
	s.ws()
	if s.byte('}') {
		return env, s.end()
	}
	for {
		s.ws()
		name, ok := s.plainString()
		if !ok {
			return env, false
		}
		s.ws()
		if !s.byte(':') {
			return env, false
		}
		s.ws()
		switch string(name) {
		case "event_id":
			ok = s.stringInto(&env.EventID)
		case "event_type":
			ok = s.stringInto(&env.EventType)
		case "aggregate_type":
			ok = s.stringInto(&env.AggregateType)
		case "aggregate_id":
			ok = s.stringInto(&env.AggregateID)
		case "correlation_id":
			ok = s.stringInto(&env.CorrelationID)
		case "causation_id":
			ok = s.stringInto(&env.CausationID)
		case "event_version":
			ok = s.intInto(&env.EventVersion)
		case "timestamp":
			start := s.i
			if _, ok = s.plainString(); ok {
				ok = env.Timestamp.UnmarshalJSON(b[start:s.i]) == nil
			}
		case "data":
			start := s.i
			if ok = s.skip(0) && !bytes.Equal(b[start:s.i], []byte("null")); ok {
				env.Data = json.RawMessage(b[start:s.i:s.i])
			}
		default:
			return env, false // unknown names match fields case-insensitively in encoding/json
		}
		if !ok {
			return env, false
		}
		s.ws()
		if s.byte(',') {
			continue
		}
		if s.byte('}') {
			return env, s.end()
		}
		return env, false
	}
}

// scan is a cursor over JSON bytes that reports false for whatever it
// does not handle, never guessing.
type scan struct {
	b []byte
	i int
}

func (s *scan) ws() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scan) byte(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only whitespace follows.
func (s *scan) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// plainString consumes a string without escapes or control characters,
// in valid UTF-8, and returns its contents.
func (s *scan) plainString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start, ascii := s.i, true
	for s.i = jsonscan.PlainEnd(s.b, s.i); s.i < len(s.b); s.i = jsonscan.PlainEnd(s.b, s.i+1) {
		switch c := s.b[s.i]; {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			return v, ascii || utf8.Valid(v)
		case c == '\\' || c < 0x20:
			return nil, false
		default: // 0x80 and above
			ascii = false
		}
	}
	return nil, false
}

func (s *scan) stringInto(dst *string) bool {
	v, ok := s.plainString()
	if ok {
		*dst = string(v)
	}
	return ok
}

// intInto takes an integer literal, as encoding/json does for an int.
func (s *scan) intInto(dst *int) bool {
	start := s.i
	s.byte('-')
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	lit := string(s.b[start:s.i])
	if lit == "" || lit == "-" || (len(lit) > 1 && lit[0] == '0') || (len(lit) > 2 && lit[:2] == "-0") {
		return false
	}
	n, err := strconv.ParseInt(lit, 10, 0)
	if err != nil {
		return false
	}
	*dst = int(n)
	return true
}

// skip consumes one JSON value, checking its syntax as encoding/json does
// before decoding (escapes well-formed, no control characters in strings;
// strings may hold any other bytes).
func (s *scan) skip(depth int) bool {
	if s.i >= len(s.b) || depth > 100 {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		s.i++
		s.ws()
		if s.byte(closer) {
			return true
		}
		for {
			s.ws()
			if c == '{' {
				if !s.skipString() {
					return false
				}
				s.ws()
				if !s.byte(':') {
					return false
				}
				s.ws()
			}
			if !s.skip(depth + 1) {
				return false
			}
			s.ws()
			if s.byte(',') {
				continue
			}
			return s.byte(closer)
		}
	case c == '"':
		return s.skipString()
	case c == '-' || (c >= '0' && c <= '9'):
		return s.skipNumber()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scan) literal(w string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(w)) {
		s.i += len(w)
		return true
	}
	return false
}

func (s *scan) skipString() bool {
	if !s.byte('"') {
		return false
	}
	for s.i = jsonscan.PlainEnd(s.b, s.i); s.i < len(s.b); s.i = jsonscan.PlainEnd(s.b, s.i) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

func (s *scan) skipNumber() bool {
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	s.byte('-')
	if !s.byte('0') && digits() == 0 {
		return false
	}
	if s.byte('.') && digits() == 0 {
		return false
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if !s.byte('+') {
			s.byte('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
