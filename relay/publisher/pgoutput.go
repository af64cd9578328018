package publisher

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// tupleColumn is one column of a pgoutput tuple: its kind ('t' text, 'b'
// binary, 'n' null, 'u' unchanged TOAST) and, for text and binary, its
// bytes.
type tupleColumn struct {
	kind byte
	data []byte
}

// parseInsert reads a pgoutput Insert message ('I', relation id, 'N', the
// new tuple) in place: each column's bytes are a slice of msg, and cols is
// reused for the result. Every other message goes through pglogrepl.Parse;
// this one is the stream's hot path, where pglogrepl allocates a column
// and copies its bytes one by one for every column of every row (a fifth
// of the WAL relay's CPU in relay-bench's profile).
func parseInsert(msg []byte, cols []tupleColumn) (uint32, []tupleColumn, error) {
	if len(msg) < 8 || msg[0] != byte(pglogrepl.MessageTypeInsert) {
		return 0, cols, errors.New("not an insert message")
	}
	rel := binary.BigEndian.Uint32(msg[1:])
	if msg[5] != 'N' {
		return 0, cols, fmt.Errorf("insert message: tuple type %q, want 'N'", msg[5])
	}
	n := int(binary.BigEndian.Uint16(msg[6:]))
	if n == 0 {
		return 0, cols, errors.New("insert message without columns")
	}
	p := 8
	cols = cols[:0]
	for i := range n {
		if p >= len(msg) {
			return 0, cols, fmt.Errorf("insert message: column %d of %d past the end", i, n)
		}
		c := tupleColumn{kind: msg[p]}
		p++
		switch c.kind {
		case pglogrepl.TupleDataTypeText, pglogrepl.TupleDataTypeBinary:
			if p+4 > len(msg) {
				return 0, cols, fmt.Errorf("insert message: column %d: length past the end", i)
			}
			l := int(binary.BigEndian.Uint32(msg[p:]))
			p += 4
			if l < 0 || l > len(msg)-p {
				return 0, cols, fmt.Errorf("insert message: column %d: %d bytes past the end", i, l)
			}
			c.data = msg[p : p+l : p+l]
			p += l
		case pglogrepl.TupleDataTypeNull, pglogrepl.TupleDataTypeToast:
		default:
			return 0, cols, fmt.Errorf("insert message: column %d: unknown kind %q", i, c.kind)
		}
		cols = append(cols, c)
	}
	return rel, cols, nil
}
