package publisher

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/jackc/pglogrepl"
)

// insertMessage encodes a pgoutput Insert message of relation rel with
// columns cols.
func insertMessage(rel uint32, cols []tupleColumn) []byte {
	b := []byte{'I'}
	b = binary.BigEndian.AppendUint32(b, rel)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for _, c := range cols {
		b = append(b, c.kind)
		if c.kind == 't' || c.kind == 'b' {
			b = binary.BigEndian.AppendUint32(b, uint32(len(c.data)))
			b = append(b, c.data...)
		}
	}
	return b
}

// parseInsert reads what pglogrepl reads from every well-formed message,
// and returns an error, never panics, on a malformed one.
func FuzzParseInsertReadsWhatPglogreplReads(f *testing.F) {
	f.Add(insertMessage(16384, []tupleColumn{{'t', []byte("42")}, {'n', nil}, {'t', []byte(`{"a":1}`)}, {'u', nil}, {'b', []byte{0, 1}}}))
	f.Add(insertMessage(1, nil))
	f.Add(insertMessage(7, []tupleColumn{{'t', []byte{}}}))
	f.Add([]byte{'I', 0, 0, 0, 1, 'N', 0, 3, 't', 0, 0, 0, 9, 'x'})
	f.Add([]byte{'I', 0, 0, 0, 1, 'K', 0, 0})
	f.Add([]byte{'I', 0, 0, 0, 1, 'N', 0, 1, 'z'})
	f.Fuzz(func(t *testing.T, msg []byte) {
		rel, cols, err := parseInsert(msg, nil)
		if err != nil {
			// Refused. pglogrepl is not asked: it reads past a malformed
			// tuple's end, and other message types it sizes by their counts.
			return
		}
		var want *pglogrepl.InsertMessage
		func() {
			defer func() { _ = recover() }()
			m, perr := pglogrepl.Parse(msg)
			if perr == nil {
				want, _ = m.(*pglogrepl.InsertMessage)
			}
		}()
		if want == nil {
			t.Fatalf("parseInsert read %q as relation %d, %d columns; pglogrepl refused it", msg, rel, len(cols))
		}
		if want.RelationID != rel || int(want.Tuple.ColumnNum) != len(cols) || len(want.Tuple.Columns) != len(cols) {
			t.Fatalf("relation %d, %d columns; pglogrepl: relation %d, %d columns", rel, len(cols), want.RelationID, want.Tuple.ColumnNum)
		}
		for i, c := range cols {
			wc := want.Tuple.Columns[i]
			if wc.DataType != c.kind || !bytes.Equal(wc.Data, c.data) {
				t.Fatalf("column %d: %q %q; pglogrepl: %q %q", i, c.kind, c.data, wc.DataType, wc.Data)
			}
		}
	})
}
