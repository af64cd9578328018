package jsonscan

import (
	"math/rand/v2"
	"testing"
)

// plainEnd is PlainEnd one byte at a time: what the eight-byte reads must
// agree with.
func plainEnd(b []byte, i int) int {
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return i
		}
	}
	return len(b)
}

func TestPlainEndStopsWhereAByteAtATimeScanStops(t *testing.T) {
	// Every byte value at every position of a word and of the tail, after
	// plain bytes and after bytes that borrow (0x00, 0x21, 0x23, 0x5d, 0x7f).
	for c := range 256 {
		for n := range 19 {
			for _, fill := range []byte{'a', 0x21, 0x23, 0x5d, 0x7f, ' '} {
				b := make([]byte, 19)
				for k := range b {
					b[k] = fill
				}
				b[n] = byte(c)
				for start := range 3 {
					if got, want := PlainEnd(b, start), plainEnd(b, start); got != want {
						t.Fatalf("byte %#x at %d after %q from %d: PlainEnd %d, want %d", c, n, fill, start, got, want)
					}
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab\"\\ \x00\x1f\x20\x7f\x80\xc3\xff!#]^")
	for range 200000 {
		b := make([]byte, r.IntN(40))
		for k := range b {
			if r.IntN(4) == 0 {
				b[k] = alphabet[r.IntN(len(alphabet))]
			} else {
				b[k] = byte(r.IntN(256))
			}
		}
		start := 0
		if len(b) > 0 {
			start = r.IntN(len(b) + 1)
		}
		if got, want := PlainEnd(b, start), plainEnd(b, start); got != want {
			t.Fatalf("%q from %d: PlainEnd %d, want %d", b, start, got, want)
		}
	}
}

func BenchmarkPlainEnd(b *testing.B) {
	s := make([]byte, 620)
	for i := range s {
		s[i] = 'x'
	}
	s = append(s, '"')
	b.Run("eight-bytes", func(b *testing.B) {
		for b.Loop() {
			PlainEnd(s, 0)
		}
	})
	b.Run("byte-at-a-time", func(b *testing.B) {
		for b.Loop() {
			plainEnd(s, 0)
		}
	})
}
