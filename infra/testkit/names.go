package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"
)

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// UniqueName returns a name derived from the test's name plus a random
// suffix, safe as a Kafka topic, consumer group or Postgres database name.
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	base := unsafeChars.ReplaceAllString(strings.ToLower(prefix+"_"+t.Name()), "_")
	if len(base) > 40 {
		base = base[:40]
	}
	var b [5]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return strings.Trim(base, "_") + "_" + hex.EncodeToString(b[:])
}
