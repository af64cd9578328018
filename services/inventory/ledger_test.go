package inventory

import (
	"reflect"
	"testing"
)

func TestLedgerReserve(t *testing.T) {
	cases := []struct {
		name      string
		ledger    Ledger
		lines     []Line
		wantShort []string
		want      Ledger
	}{
		{"all lines fit", Ledger{"A": {Available: 3}, "B": {Available: 5, Reserved: 1}},
			[]Line{{"A", 3}, {"B", 2}}, nil,
			Ledger{"A": {Reserved: 3}, "B": {Available: 3, Reserved: 3}}},
		{"one line short takes nothing", Ledger{"A": {Available: 3}, "B": {Available: 1}},
			[]Line{{"A", 1}, {"B", 2}}, []string{"B"},
			Ledger{"A": {Available: 3}, "B": {Available: 1}}},
		{"unknown SKU is short", Ledger{"A": {Available: 3}},
			[]Line{{"A", 1}, {"Z", 1}}, []string{"Z"},
			Ledger{"A": {Available: 3}}},
		{"every short SKU is named", Ledger{"A": {Available: 0, Committed: 4}, "B": {Available: 1}},
			[]Line{{"A", 1}, {"B", 2}}, []string{"A", "B"},
			Ledger{"A": {Committed: 4}, "B": {Available: 1}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			short := c.ledger.Reserve(c.lines)
			if !reflect.DeepEqual(short, c.wantShort) || !reflect.DeepEqual(c.ledger, c.want) {
				t.Fatalf("Reserve(%v) = %v, ledger %v; want %v, %v", c.lines, short, c.ledger, c.wantShort, c.want)
			}
		})
	}
}

// Reservations decided one after another against one ledger see what the
// previous ones took: the last unit goes to exactly one of them.
func TestLedgerReserveSequenceNeverOversells(t *testing.T) {
	l := Ledger{"A": {Available: 2}}
	var held int
	for range 5 {
		if short := l.Reserve([]Line{{"A", 1}}); short == nil {
			held++
		}
	}
	if held != 2 || l["A"] != (Buckets{Reserved: 2}) {
		t.Fatalf("%d held, ledger %v; want 2 held, A reserved 2", held, l)
	}
}

func TestLedgerMove(t *testing.T) {
	cases := []struct {
		name    string
		ledger  Ledger
		lines   []Line
		move    Move
		wantErr bool
		want    Ledger
	}{
		{"commit", Ledger{"A": {Reserved: 2}, "B": {Available: 1, Reserved: 3}},
			[]Line{{"A", 2}, {"B", 1}}, Move{"reserved", "committed"}, false,
			Ledger{"A": {Committed: 2}, "B": {Available: 1, Reserved: 2, Committed: 1}}},
		{"release held", Ledger{"A": {Reserved: 2}},
			[]Line{{"A", 2}}, Move{"reserved", "available"}, false,
			Ledger{"A": {Available: 2}}},
		{"release committed", Ledger{"A": {Committed: 2}},
			[]Line{{"A", 2}}, Move{"committed", "available"}, false,
			Ledger{"A": {Available: 2}}},
		{"source bucket too small changes nothing", Ledger{"A": {Reserved: 2}, "B": {Reserved: 0}},
			[]Line{{"A", 1}, {"B", 1}}, Move{"reserved", "committed"}, true,
			Ledger{"A": {Reserved: 2}, "B": {Reserved: 0}}},
		{"unknown SKU", Ledger{"A": {Reserved: 2}},
			[]Line{{"Z", 1}}, Move{"reserved", "committed"}, true,
			Ledger{"A": {Reserved: 2}}},
		{"bad bucket", Ledger{"A": {Reserved: 2}},
			[]Line{{"A", 1}}, Move{"reserved", "received"}, true,
			Ledger{"A": {Reserved: 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.ledger.Move(c.lines, c.move)
			if (err != nil) != c.wantErr || !reflect.DeepEqual(c.ledger, c.want) {
				t.Fatalf("Move(%v, %v) = %v, ledger %v; want error %v, %v", c.lines, c.move, err, c.ledger, c.wantErr, c.want)
			}
		})
	}
}
