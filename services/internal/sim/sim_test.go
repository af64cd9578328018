package sim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/services/internal/sim"
)

// A restored dice continues where the saved one stood: it neither repeats
// the draws before the save nor skips any after it.
func TestRestoredDiceContinuesTheSequence(t *testing.T) {
	a := sim.NewDice(7, 2)
	first := a.ID(0, "x", "ab", 16)
	saved, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	next := a.ID(0, "x", "ab", 16)
	b := sim.NewDice(7, 2)
	if err := b.Restore(saved); err != nil {
		t.Fatal(err)
	}
	if got := b.ID(0, "x", "ab", 16); got != next || got == first {
		t.Fatalf("restored dice drew %s; the original drew %s after the save and %s before", got, next, first)
	}
	// The kinds draw apart: drawing from kind 1 moves nothing of kind 0.
	c, d := sim.NewDice(7, 2), sim.NewDice(7, 2)
	c.Chance(1, 0.5)
	if c.ID(0, "x", "ab", 16) != d.ID(0, "x", "ab", 16) {
		t.Fatal("a draw of kind 1 moved kind 0")
	}
}

type settings struct {
	Rate  float64
	Delay time.Duration
	Count int
}

func knobs() []sim.Knob[settings] {
	return []sim.Knob[settings]{
		sim.RateKnob("rate", "", func(s *settings) *float64 { return &s.Rate }),
		sim.DurationKnob("delay", "", func(s *settings) *time.Duration { return &s.Delay }),
		sim.CountKnob("count", "", func(s *settings) *int { return &s.Count }),
	}
}

func TestApplyChangesNothingUnlessEveryValueIsValid(t *testing.T) {
	s := settings{Rate: 0.1}
	for _, bad := range []map[string]string{
		{"rate": "0.5", "delay": "-1s"},
		{"rate": "1.5"},
		{"count": "-1"},
		{"delay": "1s", "nope": "1"},
	} {
		if err := sim.Apply(&s, knobs(), bad); err == nil {
			t.Errorf("%v applied", bad)
		}
		if s != (settings{Rate: 0.1}) {
			t.Fatalf("%v changed the settings to %+v", bad, s)
		}
	}
	if err := sim.Apply(&s, knobs(), map[string]string{"rate": "1", "delay": "2s", "count": "3"}); err != nil {
		t.Fatal(err)
	}
	got := sim.Values(s, knobs())
	if want := "1 2s 3"; strings.Join([]string{got["rate"], got["delay"], got["count"]}, " ") != want {
		t.Fatalf("values %v, want %s", got, want)
	}
}
