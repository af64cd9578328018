package compat

import (
	"fmt"
	"slices"
	"strings"
)

// Mode is a Confluent Schema Registry compatibility level.
type Mode string

// Compatibility modes, with Confluent's meanings. A plain mode compares a
// new version with the latest earlier one; a transitive mode with every
// earlier one.
const (
	Backward           Mode = "BACKWARD" // new reads data of the latest old; upgrade consumers first
	BackwardTransitive Mode = "BACKWARD_TRANSITIVE"
	Forward            Mode = "FORWARD" // latest old reads data of the new; upgrade producers first
	ForwardTransitive  Mode = "FORWARD_TRANSITIVE"
	Full               Mode = "FULL" // both
	FullTransitive     Mode = "FULL_TRANSITIVE"
	None               Mode = "NONE" // no check
)

// Modes lists every mode, for help texts and validation.
var modes = []Mode{Backward, BackwardTransitive, Forward, ForwardTransitive, Full, FullTransitive, None}

// ParseMode reads a mode name, case-insensitively; "" is BACKWARD, the
// registry's default.
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return Backward, nil
	}
	m := Mode(strings.ToUpper(s))
	if !slices.Contains(modes, m) {
		return "", fmt.Errorf("unknown compatibility mode %q (want one of %v)", s, modes)
	}
	return m, nil
}

// Transitive reports whether the mode compares with every earlier version
// rather than only the latest.
func (m Mode) Transitive() bool { return strings.HasSuffix(string(m), "_TRANSITIVE") }

// PromisesBackward reports whether the mode promises that new schemas read
// old data (so old examples must validate under the new version).
func (m Mode) PromisesBackward() bool {
	return strings.HasPrefix(string(m), "BACKWARD") || strings.HasPrefix(string(m), "FULL")
}

// PromisesForward reports whether the mode promises that old schemas read
// new data.
func (m Mode) PromisesForward() bool {
	return strings.HasPrefix(string(m), "FORWARD") || strings.HasPrefix(string(m), "FULL")
}

// Breaks reports whether the change breaks the promise of the mode.
func (m Mode) Breaks(c Change) bool {
	return (m.PromisesBackward() && c.BreaksBackward) || (m.PromisesForward() && c.BreaksForward)
}

// Incompatible returns the changes that break the mode, in order.
func (m Mode) Incompatible(changes []Change) []Change {
	var out []Change
	for _, c := range changes {
		if m.Breaks(c) {
			out = append(out, c)
		}
	}
	return out
}

// Against returns the indexes of the earlier versions a new version is
// compared with, given n earlier versions in order: none under NONE, every
// one under a transitive mode, otherwise the latest.
func (m Mode) Against(n int) []int {
	if m == None || n == 0 {
		return nil
	}
	if m.Transitive() {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	return []int{n - 1}
}
