package compat_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/concordhq/concord/schemas/compat"
)

// TestRecursiveSchemaIsComparedOnceAroundItsCycle: a schema that refers to
// itself (a linked list) is diffed down to the reference that closes the
// cycle and no further, and a change inside it is reported once.
func TestRecursiveSchemaIsComparedOnceAroundItsCycle(t *testing.T) {
	list := func(extra string) []byte {
		return []byte(`{"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}` + extra + `}}},"$ref":"#/$defs/node"}`)
	}
	if cs, err := compat.Diff(compat.JSONSchema, list(""), list("")); err != nil || len(cs) != 0 {
		t.Fatalf("a recursive schema against itself: %v, %v", cs, err)
	}
	cs, err := compat.Diff(compat.JSONSchema, list(""), list(`,"v":{"type":"string"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Pointer != "/properties/v" || cs[0].Rule != "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" {
		t.Fatalf("changes %v, want one PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at /properties/v", cs)
	}
}

// TestDiffGivesUpOnSchemasWhoseReferencesMultiply: references that each
// use the next one twice cost 2^n comparisons; Diff refuses such a pair
// with an error instead of running for years.
func TestDiffGivesUpOnSchemasWhoseReferencesMultiply(t *testing.T) {
	defs := ""
	for i := range 24 {
		defs += fmt.Sprintf(`"a%d":{"properties":{"x":{"$ref":"#/$defs/a%d"},"y":{"$ref":"#/$defs/a%d"}}},`, i, i+1, i+1)
	}
	s := []byte(`{"$defs":{` + defs + `"a24":{"type":"string"}},"$ref":"#/$defs/a0"}`)
	cs, err := compat.Diff(compat.JSONSchema, s, s)
	if err == nil || !strings.Contains(err.Error(), "too complex") {
		t.Fatalf("Diff = %d changes, %v; want the too-complex error", len(cs), err)
	}
}
