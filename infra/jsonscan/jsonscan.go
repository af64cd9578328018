// Package jsonscan holds the byte scanning the JSON fast paths share (the
// catalog's validator and the consumer's envelope decoder): a JSON
// string's plain run, read eight bytes at a time. An event is mostly
// string content, so this is where those paths spend their time.
package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// PlainEnd returns the index of the first byte of b at or after i that
// ends a plain run of string content: a quote, a backslash, a control
// character (below 0x20) or a byte of a multi-byte UTF-8 sequence (0x80
// and above). It returns len(b) when there is none.
func PlainEnd(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// Each term sets a byte's high bit when that byte is one the run
		// stops at; a borrow can also set it in a later byte, never in an
		// earlier one, so the lowest set bit is the first such byte.
		m := (x - 0x20*ones) & ^x // below 0x20
		m |= zeroByte(x ^ '"'*ones)
		m |= zeroByte(x ^ '\\'*ones)
		m = (m | x) & highs // 0x80 and above
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return i
		}
	}
	return len(b)
}

// zeroByte sets the high bit of each zero byte of x (and possibly of
// bytes after the first zero byte).
func zeroByte(x uint64) uint64 { return (x - ones) & ^x }
