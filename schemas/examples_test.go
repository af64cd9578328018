package schemas

import (
	"io/fs"
	"testing"
)

// exampleEvents returns the catalog's example events (events/*/examples),
// the seeds of the fuzz tests: real envelopes the mutations start from.
func exampleEvents(tb testing.TB) [][]byte {
	tb.Helper()
	names, err := fs.Glob(files, "events/*/examples/*.json")
	if err != nil || len(names) == 0 {
		tb.Fatalf("no example events: %v", err)
	}
	out := make([][]byte, 0, len(names))
	for _, name := range names {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}
