package compat_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"testing"
	"time"

	"github.com/concordhq/concord/schemas/compat"
)

// Bounds on a fuzzed schema pair. The engine walks documents recursively;
// schemactl only ever reads our own schema files, which stay far inside
// these, so larger inputs would only slow the fuzzer down.
const (
	fuzzMaxBytes = 4 << 10
	fuzzMaxDepth = 24
	// fuzzDiffTimeout is how long one Diff may take before the target calls
	// it a hang: a pair within the bounds above is diffed in microseconds.
	fuzzDiffTimeout = 5 * time.Second
)

var allModes = []compat.Mode{compat.Backward, compat.BackwardTransitive, compat.Forward,
	compat.ForwardTransitive, compat.Full, compat.FullTransitive, compat.None}

// FuzzDiffJSONSchemaSelfAndDeterminism feeds pairs of JSON Schema
// documents to compat.Diff, the entry point of `schemactl diff`.
func FuzzDiffJSONSchemaSelfAndDeterminism(f *testing.F) {
	fuzzDiff(f, compat.JSONSchema, "*.schema.json")
}

// FuzzDiffAvroSelfAndDeterminism is the same for Avro schemas.
func FuzzDiffAvroSelfAndDeterminism(f *testing.F) {
	fuzzDiff(f, compat.Avro, "*.avsc")
}

// fuzzDiff holds Diff to what must hold for any input within the bounds:
// it returns (never panics, never hangs); a schema compared with itself
// has no change at all, so none that any mode calls incompatible; and the
// same pair gives the same changes, in the same order, every time.
func fuzzDiff(f *testing.F, format compat.Format, glob string) {
	files, err := filepath.Glob(filepath.Join("..", "events", "*", glob))
	if err != nil {
		f.Fatal(err)
	}
	var docs [][]byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		docs = append(docs, b)
	}
	for i, d := range docs {
		f.Add(d, d)
		if i > 0 {
			f.Add(docs[i-1], d)
		}
	}
	for _, tc := range changeCases {
		if tc.format == format {
			f.Add([]byte(tc.old), []byte(tc.new))
		}
	}
	f.Fuzz(func(t *testing.T, old, new []byte) {
		if !withinBounds(old) || !withinBounds(new) {
			t.Skip("outside the bounds of the target")
		}
		self := diffWithin(t, format, old, old)
		if self.err == nil {
			if len(self.changes) != 0 {
				t.Fatalf("%s compared with itself: %v", old, self.changes)
			}
			for _, m := range allModes {
				if bad := m.Incompatible(self.changes); len(bad) != 0 {
					t.Fatalf("%s compared with itself is incompatible under %s: %v", old, m, bad)
				}
			}
		}
		first := diffWithin(t, format, old, new)
		second := diffWithin(t, format, old, new)
		if (first.err == nil) != (second.err == nil) || !reflect.DeepEqual(first.changes, second.changes) {
			t.Fatalf("diff of %s → %s is not deterministic:\n first %v (err %v)\nsecond %v (err %v)",
				old, new, first.changes, first.err, second.changes, second.err)
		}
		if self.err != nil && first.err == nil {
			t.Fatalf("old %s fails alone (%v) but diffs against %s", old, self.err, new)
		}
	})
}

type diffResult struct {
	changes []compat.Change
	err     error
}

// diffWithin runs compat.Diff and fails the test if it has not returned
// after fuzzDiffTimeout. A panic in Diff propagates and fails the test.
func diffWithin(t *testing.T, format compat.Format, old, new []byte) diffResult {
	t.Helper()
	done := make(chan diffResult, 1)
	panicked := make(chan any, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				panicked <- fmt.Sprintf("%v\n%s", p, debug.Stack())
			}
		}()
		cs, err := compat.Diff(format, old, new)
		done <- diffResult{cs, err}
	}()
	select {
	case r := <-done:
		return r
	case p := <-panicked:
		t.Fatalf("Diff panicked on %s → %s: %v", old, new, p)
	case <-time.After(fuzzDiffTimeout):
		t.Fatalf("Diff of %s → %s has not returned after %s", old, new, fuzzDiffTimeout)
	}
	return diffResult{}
}

// withinBounds reports whether b is at most fuzzMaxBytes long and nests
// arrays and objects at most fuzzMaxDepth deep (counted on the bytes,
// outside strings, so it holds for invalid JSON too).
func withinBounds(b []byte) bool {
	if len(b) > fuzzMaxBytes {
		return false
	}
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > fuzzMaxDepth {
				return false
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return true
}
