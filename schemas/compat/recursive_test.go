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
	if len(cs) != 1 || cs[0].Pointer != "/properties/v" || cs[0].Rule != "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" {
		t.Fatalf("changes %v, want one OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at /properties/v", cs)
	}
}

// TestReferencesThatMultiplyAreComparedOncePerPair: references that each
// use the next one twice would cost 2^n comparisons walked naively; each
// pair of subschemas is compared once, so a schema against itself is
// judged at once. A change at the bottom is reached along 2^n paths, one
// change per path: Diff refuses that pair with an error instead.
func TestReferencesThatMultiplyAreComparedOncePerPair(t *testing.T) {
	schema := func(leaf string) []byte {
		defs := ""
		for i := range 24 {
			defs += fmt.Sprintf(`"a%d":{"properties":{"x":{"$ref":"#/$defs/a%d"},"y":{"$ref":"#/$defs/a%d"}}},`, i, i+1, i+1)
		}
		return []byte(`{"$defs":{` + defs + `"a24":{"type":"` + leaf + `"}},"$ref":"#/$defs/a0"}`)
	}
	if cs, err := compat.Diff(compat.JSONSchema, schema("string"), schema("string")); err != nil || len(cs) != 0 {
		t.Fatalf("the schema against itself: %d changes, %v; want none", len(cs), err)
	}
	cs, err := compat.Diff(compat.JSONSchema, schema("string"), schema("integer"))
	if err == nil || !strings.Contains(err.Error(), "too complex") {
		t.Fatalf("Diff = %d changes, %v; want the too-complex error", len(cs), err)
	}
}

// TestDiffGivesUpOnCombinationsTooWideToCompare: every branch of a
// combination is compared with every branch of the other; past the step
// bound Diff refuses with an error instead of running on.
func TestDiffGivesUpOnCombinationsTooWideToCompare(t *testing.T) {
	branches := func(offset int) string {
		var b []string
		for i := range 160 {
			b = append(b, fmt.Sprintf(`{"const":%d}`, i+offset))
		}
		return `{"oneOf":[` + strings.Join(b, ",") + `]}`
	}
	cs, err := compat.Diff(compat.JSONSchema, []byte(branches(0)), []byte(branches(1000)))
	if err == nil || !strings.Contains(err.Error(), "too complex") {
		t.Fatalf("Diff = %d changes, %v; want the too-complex error", len(cs), err)
	}
}
