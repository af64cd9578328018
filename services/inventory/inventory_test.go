package inventory

import (
	"reflect"
	"testing"
)

func TestDecide(t *testing.T) {
	cases := []struct {
		s    Status
		a    Action
		next Status
		move Move
		ok   bool
	}{
		{StatusHeld, Commit, StatusCommitted, Move{"reserved", "committed"}, true},
		{StatusHeld, Release, StatusReleased, Move{"reserved", "available"}, true},
		{StatusCommitted, Commit, StatusCommitted, Move{}, false},
		{StatusCommitted, Release, StatusReleased, Move{"committed", "available"}, true},
		{StatusReleased, Commit, StatusReleased, Move{}, false},
		{StatusReleased, Release, StatusReleased, Move{}, false},
		{StatusRejected, Commit, StatusRejected, Move{}, false},
		{StatusRejected, Release, StatusRejected, Move{}, false},
	}
	for _, c := range cases {
		next, m, ok := Decide(c.s, c.a)
		if next != c.next || m != c.move || ok != c.ok {
			t.Errorf("Decide(%s, %s) = %s, %v, %v; want %s, %v, %v", c.s, c.a, next, m, ok, c.next, c.move, c.ok)
		}
	}
}

func TestNormalizeMergesAndSortsBySKU(t *testing.T) {
	got, err := Normalize([]Line{{"B", 1}, {"A", 2}, {"B", 3}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Line{{"A", 2}, {"B", 4}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize = %v; want %v", got, want)
	}
	if _, err := Normalize([]Line{{"A", 0}}); err == nil {
		t.Fatal("Normalize accepted a zero quantity")
	}
}
