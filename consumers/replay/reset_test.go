package replay

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewOffsetMatchesApacheResetOffsets(t *testing.T) {
	// A partition whose log spans [100, 200) and whose group committed 150.
	p := Partition{Topic: "t", Partition: 3, Start: 100, End: 200, Committed: 150, AtTime: -1}
	noCommit := p
	noCommit.Committed = -1
	atTime := p
	atTime.AtTime = 120
	// A log from offset 0 whose group committed 0 and whose first record
	// is the one at the asked time: offset 0 is an offset like any other.
	fromZero := Partition{Topic: "t", Partition: 0, Start: 0, End: 200, Committed: 0, AtTime: 0}
	tests := []struct {
		name string
		spec Spec
		p    Partition
		want int64
		err  bool
	}{
		{"to-earliest", Spec{Strategy: ToEarliest}, p, 100, false},
		{"to-latest", Spec{Strategy: ToLatest}, p, 200, false},
		{"to-current", Spec{Strategy: ToCurrent}, p, 150, false},
		{"to-current at offset 0", Spec{Strategy: ToCurrent}, fromZero, 0, false},
		{"to-current without a commit is the log end", Spec{Strategy: ToCurrent}, noCommit, 200, false},
		{"to-offset inside the log", Spec{Strategy: ToOffset, Offset: 170}, p, 170, false},
		{"to-offset above the end clamps to the end", Spec{Strategy: ToOffset, Offset: 500}, p, 200, false},
		{"to-offset below the start clamps to the start", Spec{Strategy: ToOffset, Offset: 5}, p, 100, false},
		{"to-offset at the end is the end", Spec{Strategy: ToOffset, Offset: 200}, p, 200, false},
		{"to-offset needs no commit", Spec{Strategy: ToOffset, Offset: 170}, noCommit, 170, false},
		{"shift-by back", Spec{Strategy: ShiftBy, Offset: -20}, p, 130, false},
		{"shift-by forward", Spec{Strategy: ShiftBy, Offset: 20}, p, 170, false},
		{"shift-by past the start clamps", Spec{Strategy: ShiftBy, Offset: -1000}, p, 100, false},
		{"shift-by past the end clamps", Spec{Strategy: ShiftBy, Offset: 1000}, p, 200, false},
		{"shift-by does not overflow", Spec{Strategy: ShiftBy, Offset: 1<<63 - 1}, p, 200, false},
		{"shift-by from a commit at offset 0", Spec{Strategy: ShiftBy, Offset: 5}, fromZero, 5, false},
		{"shift-by without a commit fails", Spec{Strategy: ShiftBy, Offset: -1}, noCommit, 0, true},
		{"to-datetime finds an offset", Spec{Strategy: ToDatetime}, atTime, 120, false},
		{"to-datetime finds offset 0", Spec{Strategy: ToDatetime}, fromZero, 0, false},
		{"to-datetime after the last record is the log end", Spec{Strategy: ToDatetime}, p, 200, false},
		{"by-duration finds an offset", Spec{Strategy: ByDuration}, atTime, 120, false},
		{"by-duration with nothing that recent is the log end", Spec{Strategy: ByDuration}, p, 200, false},
		{"empty log", Spec{Strategy: ToOffset, Offset: 3}, Partition{Committed: -1, AtTime: -1}, 0, false},
		{"unknown strategy", Spec{}, p, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewOffset(tt.spec, tt.p)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if !tt.err && got != tt.want {
				t.Fatalf("NewOffset = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestParseDurationAcceptsJavaDurations(t *testing.T) {
	tests := map[string]time.Duration{
		"PT15M":       15 * time.Minute,
		"PT1H30M":     90 * time.Minute,
		"P1D":         24 * time.Hour,
		"PT2H":        2 * time.Hour,
		"P1DT2H":      26 * time.Hour,
		"PT0.5S":      500 * time.Millisecond,
		"PT-0.5S":     -500 * time.Millisecond,
		"-PT10S":      -10 * time.Second,
		"pt2m":        2 * time.Minute,
		"PT1.000001S": time.Second + time.Microsecond,
		"90s":         90 * time.Second, // Go syntax, accepted too
	}
	for in, want := range tests {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "P", "PT", "15 minutes", "P1H"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q): no error", bad)
		}
	}
}

func TestCheckInactiveRefusesLiveGroups(t *testing.T) {
	for state, ok := range map[string]bool{
		"Empty": true, "Dead": true, "": true,
		"Stable": false, "PreparingRebalance": false, "CompletingRebalance": false,
		"Assigning": false, "Reconciling": false,
	} {
		err := CheckInactive(Group{Name: "g", State: state})
		if (err == nil) != ok {
			t.Errorf("state %q: err = %v", state, err)
		}
		if err != nil && !errors.Is(err, ErrGroupActive) {
			t.Errorf("state %q: %v is not ErrGroupActive", state, err)
		}
		want := "Assignments can only be reset if the group 'g' is inactive, but the current state is " + state + "."
		if err != nil && !strings.HasSuffix(err.Error(), want) {
			t.Errorf("state %q: %q does not end with Apache's sentence %q", state, err, want)
		}
	}
}

func TestApacheStateSpellsTheConsumerProtocolStatesAsApacheDoes(t *testing.T) {
	for in, want := range map[string]string{"stable": "Stable", "reconciling": "Reconciling", "assigning": "Assigning",
		"empty": "Empty", "dead": "Dead", "PreparingRebalance": "PreparingRebalance", "Weird": "Weird"} {
		if got := apacheState(in); got != want {
			t.Errorf("apacheState(%q) = %q, want %q", in, got, want)
		}
	}
}
