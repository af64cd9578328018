package compat_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/concordhq/concord/schemas/compat"
)

// obj wraps property schemas in an object schema; closed adds
// "additionalProperties": false.
func obj(closed bool, required string, props string) string {
	s := `{"type":"object","properties":{` + props + `}`
	if required != "" {
		s += `,"required":[` + required + `]`
	}
	if closed {
		s += `,"additionalProperties":false`
	}
	return s + `}`
}

// rec is an Avro record with the given fields.
func rec(fields string) string {
	return `{"type":"record","name":"Payment","namespace":"concord","fields":[` + fields + `]}`
}

// card is an Avro record nested in a Payment.
func card(fields string) string {
	return `{"type":"record","name":"Card","fields":[` + fields + `]}`
}

// changeCase is one old→new edit: the rule it must produce and whether the
// result keeps the BACKWARD and FORWARD promises.
type changeCase struct {
	name     string
	format   compat.Format
	old, new string
	rule     string
	backward bool // compatible under BACKWARD
	forward  bool // compatible under FORWARD
}

var changeCases = []changeCase{
	// JSON Schema: content models and properties.
	{"optional property added to closed object", compat.JSONSchema,
		obj(true, "", `"a":{"type":"string"}`), obj(true, "", `"a":{"type":"string"},"b":{"type":"string"}`),
		"OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", true, false},
	{"required property added to closed object", compat.JSONSchema,
		obj(true, "", `"a":{"type":"string"}`), obj(true, `"b"`, `"a":{"type":"string"},"b":{"type":"string"}`),
		"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", false, false},
	{"required property with default added to closed object", compat.JSONSchema,
		obj(true, "", `"a":{"type":"string"}`), obj(true, `"b"`, `"a":{"type":"string"},"b":{"type":"string","default":"x"}`),
		"REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", true, false},
	{"property added to open object", compat.JSONSchema,
		obj(false, "", `"a":{"type":"string"}`), obj(false, "", `"a":{"type":"string"},"b":{"type":"string"}`),
		"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", false, true},
	{"property with empty schema added to open object", compat.JSONSchema,
		obj(false, "", `"a":{"type":"string"}`), obj(false, "", `"a":{"type":"string"},"b":{}`),
		"PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", true, true},
	{"property with only annotations and a vendor extension added to open object", compat.JSONSchema,
		obj(false, "", `"a":{"type":"string"}`), obj(false, "", `"a":{"type":"string"},"b":{"description":"d","x-go-type":"int64"}`),
		"PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", true, true},
	{"property removed from open object", compat.JSONSchema,
		obj(false, "", `"a":{"type":"string"},"b":{"type":"string"}`), obj(false, "", `"a":{"type":"string"}`),
		"PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", true, false},
	{"property removed from closed object", compat.JSONSchema,
		obj(true, "", `"a":{"type":"string"},"b":{"type":"string"}`), obj(true, "", `"a":{"type":"string"}`),
		"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", false, true},
	{"required property removed from closed object", compat.JSONSchema,
		obj(true, `"a","b"`, `"a":{"type":"string"},"b":{"type":"string"}`), obj(true, `"a"`, `"a":{"type":"string"}`),
		"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", false, false},
	{"required property with default removed from closed object", compat.JSONSchema,
		obj(true, `"a","b"`, `"a":{"type":"string"},"b":{"type":"string","default":"x"}`), obj(true, `"a"`, `"a":{"type":"string"}`),
		"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", false, true},
	{"property with false removed from closed object", compat.JSONSchema,
		obj(true, "", `"a":{"type":"string"},"b":false`), obj(true, "", `"a":{"type":"string"}`),
		"PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", true, true},
	{"property added covered by partially open model", compat.JSONSchema,
		`{"type":"object","additionalProperties":{"type":"string"}}`, `{"type":"object","properties":{"b":{"type":"string"}},"additionalProperties":{"type":"string"}}`,
		"PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", true, true},
	{"property added not covered by partially open model", compat.JSONSchema,
		`{"type":"object","additionalProperties":{"type":"string"}}`, `{"type":"object","properties":{"b":{"type":"integer"}},"additionalProperties":{"type":"string"}}`,
		"PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", false, false},
	{"closed object opened", compat.JSONSchema,
		obj(true, "", `"a":{"type":"string"}`), obj(false, "", `"a":{"type":"string"}`),
		"ADDITIONAL_PROPERTIES_ADDED", true, false},
	{"open object closed", compat.JSONSchema,
		obj(false, "", `"a":{"type":"string"}`), obj(true, "", `"a":{"type":"string"}`),
		"ADDITIONAL_PROPERTIES_REMOVED", false, true},
	{"existing property made required", compat.JSONSchema,
		obj(true, "", `"a":{"type":"string"}`), obj(true, `"a"`, `"a":{"type":"string"}`),
		"REQUIRED_ATTRIBUTE_ADDED", false, true},
	{"existing property made required with default", compat.JSONSchema,
		obj(true, "", `"a":{"type":"string","default":"x"}`), obj(true, `"a"`, `"a":{"type":"string","default":"x"}`),
		"REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", true, true},
	{"required property made optional", compat.JSONSchema,
		obj(true, `"a"`, `"a":{"type":"string"}`), obj(true, "", `"a":{"type":"string"}`),
		"REQUIRED_ATTRIBUTE_REMOVED", true, false},
	{"required property with default removed from closed object", compat.JSONSchema,
		obj(true, `"a","b"`, `"a":{"type":"string"},"b":{"type":"string","default":"x"}`), obj(true, `"a"`, `"a":{"type":"string"}`),
		"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", false, true},
	// Types.
	{"integer widened to number", compat.JSONSchema, `{"type":"integer"}`, `{"type":"number"}`, "TYPE_EXTENDED", true, false},
	{"number narrowed to integer", compat.JSONSchema, `{"type":"number"}`, `{"type":"integer"}`, "TYPE_NARROWED", false, true},
	{"null added to type", compat.JSONSchema, `{"type":"string"}`, `{"type":["string","null"]}`, "SUM_TYPE_EXTENDED", true, false},
	{"string changed to integer", compat.JSONSchema, `{"type":"string"}`, `{"type":"integer"}`, "TYPE_CHANGED", false, false},
	{"type added to an untyped schema", compat.JSONSchema, `{"minLength":1}`, `{"minLength":1,"type":"string"}`, "TYPE_NARROWED", false, true},
	{"constraint added to the empty schema", compat.JSONSchema, `{}`, `{"minLength":1}`, "TYPE_CHANGED", false, true},
	// Enums.
	{"enum value added", compat.JSONSchema, `{"enum":["a","b"]}`, `{"enum":["a","b","c"]}`, "ENUM_ARRAY_EXTENDED", true, false},
	{"enum value removed", compat.JSONSchema, `{"enum":["a","b"]}`, `{"enum":["a"]}`, "ENUM_ARRAY_NARROWED", false, true},
	{"enum value replaced", compat.JSONSchema, `{"enum":["a","b"]}`, `{"enum":["a","c"]}`, "ENUM_ARRAY_CHANGED", false, false},
	{"const changed", compat.JSONSchema, `{"const":"order"}`, `{"const":"invoice"}`, "ENUM_ARRAY_CHANGED", false, false},
	// Combined types.
	{"oneOf branch added", compat.JSONSchema, `{"oneOf":[{"type":"string"}]}`, `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, "SUM_TYPE_EXTENDED", true, false},
	{"anyOf branch removed", compat.JSONSchema, `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `{"anyOf":[{"type":"string"}]}`, "SUM_TYPE_NARROWED", false, true},
	{"allOf branch added", compat.JSONSchema, `{"allOf":[{"type":"string"}]}`, `{"allOf":[{"type":"string"},{"minLength":2}]}`, "PRODUCT_TYPE_EXTENDED", false, true},
	{"oneOf became anyOf", compat.JSONSchema, `{"oneOf":[{"type":"string"}]}`, `{"anyOf":[{"type":"string"}]}`, "COMBINED_TYPE_EXTENDED", true, true},
	{"oneOf branch narrowed in place", compat.JSONSchema, `{"oneOf":[{"type":"number"}]}`, `{"oneOf":[{"type":"integer"}]}`, "COMBINED_TYPE_SUBSCHEMAS_CHANGED", false, true},
	{"oneOf branch narrowed beside an unchanged one", compat.JSONSchema,
		`{"oneOf":[{"type":"string"},{"type":"number"}]}`, `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, "COMBINED_TYPE_SUBSCHEMAS_CHANGED", false, true},
	{"oneOf became anyOf with a branch narrowed", compat.JSONSchema, `{"oneOf":[{"type":"number"}]}`, `{"anyOf":[{"type":"integer"}]}`, "COMBINED_TYPE_SUBSCHEMAS_CHANGED", false, true},
	{"oneOf of two introduced", compat.JSONSchema, `{"type":"string"}`, `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, "SUM_TYPE_EXTENDED", true, false},
	{"oneOf of two removed", compat.JSONSchema, `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"type":"string"}`, "TYPE_CHANGED", false, true},
	// Numeric and string bounds, pattern.
	{"maximum added", compat.JSONSchema, `{"type":"integer"}`, `{"type":"integer","maximum":10}`, "MAXIMUM_ADDED", false, true},
	{"maximum increased", compat.JSONSchema, `{"type":"integer","maximum":10}`, `{"type":"integer","maximum":20}`, "MAXIMUM_INCREASED", true, false},
	{"maximum decreased", compat.JSONSchema, `{"type":"integer","maximum":10}`, `{"type":"integer","maximum":5}`, "MAXIMUM_DECREASED", false, true},
	{"minimum increased", compat.JSONSchema, `{"type":"integer","minimum":0}`, `{"type":"integer","minimum":1}`, "MINIMUM_INCREASED", false, true},
	{"minimum removed", compat.JSONSchema, `{"type":"integer","minimum":0}`, `{"type":"integer"}`, "MINIMUM_REMOVED", true, false},
	{"exclusiveMinimum decreased", compat.JSONSchema, `{"exclusiveMinimum":5}`, `{"exclusiveMinimum":1}`, "EXCLUSIVE_MINIMUM_DECREASED", true, false},
	{"maxLength decreased", compat.JSONSchema, `{"type":"string","maxLength":64}`, `{"type":"string","maxLength":32}`, "MAX_LENGTH_DECREASED", false, true},
	{"maxLength increased", compat.JSONSchema, `{"type":"string","maxLength":64}`, `{"type":"string","maxLength":128}`, "MAX_LENGTH_INCREASED", true, false},
	{"minLength added", compat.JSONSchema, `{"type":"string"}`, `{"type":"string","minLength":1}`, "MIN_LENGTH_ADDED", false, true},
	{"multipleOf reduced", compat.JSONSchema, `{"multipleOf":10}`, `{"multipleOf":5}`, "MULTIPLE_OF_REDUCED", true, false},
	{"pattern added", compat.JSONSchema, `{"type":"string"}`, `{"type":"string","pattern":"^[A-Z]{3}$"}`, "PATTERN_ADDED", false, true},
	{"pattern removed", compat.JSONSchema, `{"type":"string","pattern":"^[A-Z]{3}$"}`, `{"type":"string"}`, "PATTERN_REMOVED", true, false},
	{"pattern changed", compat.JSONSchema, `{"type":"string","pattern":"^[A-Z]{3}$"}`, `{"type":"string","pattern":"^[a-z]{3}$"}`, "PATTERN_CHANGED", false, false},
	// Arrays.
	{"array item type narrowed", compat.JSONSchema, `{"type":"array","items":{"type":"number"}}`, `{"type":"array","items":{"type":"integer"}}`, "TYPE_NARROWED", false, true},
	{"minItems added", compat.JSONSchema, `{"type":"array"}`, `{"type":"array","minItems":1}`, "MIN_ITEMS_ADDED", false, true},
	{"maxItems removed", compat.JSONSchema, `{"type":"array","maxItems":3}`, `{"type":"array"}`, "MAX_ITEMS_REMOVED", true, false},
	{"uniqueItems added", compat.JSONSchema, `{"type":"array"}`, `{"type":"array","uniqueItems":true}`, "UNIQUE_ITEMS_ADDED", false, true},
	{"prefixItems item narrowed", compat.JSONSchema,
		`{"type":"array","prefixItems":[{"type":"number"}]}`, `{"type":"array","prefixItems":[{"type":"integer"}]}`, "TYPE_NARROWED", false, true},
	{"prefixItems item added", compat.JSONSchema,
		`{"type":"array","prefixItems":[{"type":"string"}]}`, `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}]}`,
		"ITEM_ADDED_TO_OPEN_CONTENT_MODEL", false, true},
	{"prefixItems item removed", compat.JSONSchema,
		`{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}]}`, `{"type":"array","prefixItems":[{"type":"string"}]}`,
		"ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", true, false},
	// Annotations and references.
	{"description changed", compat.JSONSchema, `{"type":"string","description":"a"}`, `{"type":"string","description":"b"}`, "DESCRIPTION_CHANGED", true, true},
	{"change behind a local $ref", compat.JSONSchema,
		`{"$defs":{"m":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/m"}}}`, `{"$defs":{"m":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/m"}}}`,
		"TYPE_CHANGED", false, false},

	{"change beside a local $ref", compat.JSONSchema,
		`{"$defs":{"m":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/m","maximum":10}}}`, `{"$defs":{"m":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/m","maximum":5}}}`,
		"MAXIMUM_DECREASED", false, true},
	{"keyword the engine does not model changed", compat.JSONSchema,
		`{"type":"string","contentEncoding":"base64"}`, `{"type":"string","contentEncoding":"base16"}`, "KEYWORD_CHANGED", false, false},

	// Avro: fields.
	{"avro field added with default", compat.Avro,
		rec(`{"name":"id","type":"string"}`), rec(`{"name":"id","type":"string"},{"name":"memo","type":["null","string"],"default":null}`),
		"FIELD_ADDED", true, true},
	{"avro field added without default", compat.Avro,
		rec(`{"name":"id","type":"string"}`), rec(`{"name":"id","type":"string"},{"name":"memo","type":"string"}`),
		"READER_FIELD_MISSING_DEFAULT_VALUE", false, true},
	{"avro field with default removed", compat.Avro,
		rec(`{"name":"id","type":"string"},{"name":"memo","type":"string","default":""}`), rec(`{"name":"id","type":"string"}`),
		"FIELD_REMOVED", true, true},
	{"avro field without default removed", compat.Avro,
		rec(`{"name":"id","type":"string"},{"name":"memo","type":"string"}`), rec(`{"name":"id","type":"string"}`),
		"FIELD_REMOVED_WITHOUT_DEFAULT", true, false},
	{"avro field renamed with alias", compat.Avro,
		rec(`{"name":"amount","type":"long"}`), rec(`{"name":"amount_minor","aliases":["amount"],"type":"long"}`),
		"FIELD_RENAMED_WITH_ALIAS", true, false},
	{"avro field renamed without alias", compat.Avro,
		rec(`{"name":"amount","type":"long"}`), rec(`{"name":"amount_minor","type":"long"}`),
		"READER_FIELD_MISSING_DEFAULT_VALUE", false, false},
	// Avro: promotions.
	{"avro int promoted to long", compat.Avro, rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"long"}`), "TYPE_PROMOTED", true, false},
	{"avro int promoted to float", compat.Avro, rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"float"}`), "TYPE_PROMOTED", true, false},
	{"avro int promoted to double", compat.Avro, rec(`{"name":"n","type":"int"}`), rec(`{"name":"n","type":"double"}`), "TYPE_PROMOTED", true, false},
	{"avro long promoted to double", compat.Avro, rec(`{"name":"n","type":"long"}`), rec(`{"name":"n","type":"double"}`), "TYPE_PROMOTED", true, false},
	{"avro float promoted to double", compat.Avro, rec(`{"name":"n","type":"float"}`), rec(`{"name":"n","type":"double"}`), "TYPE_PROMOTED", true, false},
	{"avro string to bytes", compat.Avro, rec(`{"name":"n","type":"string"}`), rec(`{"name":"n","type":"bytes"}`), "TYPE_PROMOTED", true, true},
	{"avro long demoted to int", compat.Avro, rec(`{"name":"n","type":"long"}`), rec(`{"name":"n","type":"int"}`), "TYPE_MISMATCH", false, true},
	{"avro string to long", compat.Avro, rec(`{"name":"n","type":"string"}`), rec(`{"name":"n","type":"long"}`), "TYPE_MISMATCH", false, false},
	// Avro: enums.
	{"avro enum symbol added", compat.Avro,
		`{"type":"enum","name":"S","symbols":["A","B"]}`, `{"type":"enum","name":"S","symbols":["A","B","C"]}`, "ENUM_SYMBOL_ADDED", true, false},
	{"avro enum symbol added, old enum has a default", compat.Avro,
		`{"type":"enum","name":"S","symbols":["A","B"],"default":"A"}`, `{"type":"enum","name":"S","symbols":["A","B","C"],"default":"A"}`, "ENUM_SYMBOL_ADDED", true, true},
	{"avro enum symbol removed", compat.Avro,
		`{"type":"enum","name":"S","symbols":["A","B"]}`, `{"type":"enum","name":"S","symbols":["A"]}`, "MISSING_ENUM_SYMBOLS", false, true},
	// Avro: unions.
	{"avro union branch added", compat.Avro, rec(`{"name":"n","type":["null","string"]}`), rec(`{"name":"n","type":["null","string","long"]}`), "UNION_BRANCH_ADDED", true, false},
	{"avro union branch removed", compat.Avro, rec(`{"name":"n","type":["null","string","long"]}`), rec(`{"name":"n","type":["null","string"]}`), "MISSING_UNION_BRANCH", false, true},
	{"avro field made nullable", compat.Avro, rec(`{"name":"n","type":"string"}`), rec(`{"name":"n","type":["null","string"],"default":null}`), "TYPE_CHANGED_TO_UNION", true, false},
	{"avro union branch promoted", compat.Avro, rec(`{"name":"n","type":["null","int"]}`), rec(`{"name":"n","type":["null","long"]}`), "UNION_BRANCH_REMOVED", true, false},
	{"avro field without default added to a record in a union", compat.Avro,
		rec(`{"name":"card","type":["null",` + card(`{"name":"id","type":"string"}`) + `]}`),
		rec(`{"name":"card","type":["null",` + card(`{"name":"id","type":"string"},{"name":"brand","type":"string"}`) + `]}`),
		"READER_FIELD_MISSING_DEFAULT_VALUE", false, true},
	// Avro: names and fixed.
	{"avro record renamed with alias", compat.Avro,
		rec(`{"name":"id","type":"string"}`), `{"type":"record","name":"Charge","namespace":"concord","aliases":["Payment"],"fields":[{"name":"id","type":"string"}]}`,
		"NAME_CHANGED_WITH_ALIAS", true, false},
	{"avro record renamed", compat.Avro,
		rec(`{"name":"id","type":"string"}`), `{"type":"record","name":"Charge","namespace":"concord","fields":[{"name":"id","type":"string"}]}`,
		"NAME_MISMATCH", false, false},
	{"avro fixed resized", compat.Avro, `{"type":"fixed","name":"H","size":16}`, `{"type":"fixed","name":"H","size":32}`, "FIXED_SIZE_MISMATCH", false, false},
	{"avro nested array item promoted", compat.Avro,
		rec(`{"name":"xs","type":{"type":"array","items":"int"}}`), rec(`{"name":"xs","type":{"type":"array","items":"long"}}`), "TYPE_PROMOTED", true, false},
}

func TestChangeTableVerdictsPerMode(t *testing.T) {
	if len(changeCases) < 40 {
		t.Fatalf("the table holds %d cases, want at least 40", len(changeCases))
	}
	for _, tc := range changeCases {
		t.Run(tc.name, func(t *testing.T) {
			changes, err := compat.Diff(tc.format, []byte(tc.old), []byte(tc.new))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(changes, func(c compat.Change) bool { return c.Rule == tc.rule }) {
				t.Errorf("rule %s not reported; got %v", tc.rule, rules(changes))
			}
			want := map[compat.Mode]bool{
				compat.Backward: tc.backward, compat.BackwardTransitive: tc.backward,
				compat.Forward: tc.forward, compat.ForwardTransitive: tc.forward,
				compat.Full: tc.backward && tc.forward, compat.FullTransitive: tc.backward && tc.forward,
				compat.None: true,
			}
			for mode, ok := range want {
				if got := len(mode.Incompatible(changes)) == 0; got != ok {
					t.Errorf("%s: compatible = %v, want %v (changes %v)", mode, got, ok, rules(changes))
				}
			}
		})
	}
}

func rules(cs []compat.Change) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Pointer+" "+c.Rule+" ["+c.Class()+"]")
	}
	return strings.Join(out, "; ")
}

// TestChangesNameThePointerAndTheValues pins what a review shows: every
// change of a diff, in order, with the pointer into the schema and the old
// and new values ("" when absent, cut at 120 bytes).
func TestChangesNameThePointerAndTheValues(t *testing.T) {
	long := strings.Repeat("a", 118) // 120 bytes as a JSON string
	for _, tc := range []struct {
		name     string
		format   compat.Format
		old, new string
		want     []string // pointer rule old new
	}{
		{"bound added", compat.JSONSchema, `{"type":"integer"}`, `{"type":"integer","maximum":10}`,
			[]string{`/maximum MAXIMUM_ADDED  10`}},
		{"const removed", compat.JSONSchema, `{"type":"string","const":"a"}`, `{"type":"string"}`,
			[]string{` PRODUCT_TYPE_NARROWED {"const":"a","type":"string"} {"type":"string"}`}},
		{"one-branch oneOf introduced", compat.JSONSchema, `{"type":"string"}`, `{"oneOf":[{"type":"string"}]}`, nil},
		{"one-branch oneOf removed", compat.JSONSchema, `{"oneOf":[{"type":"string"}]}`, `{"type":"string"}`, nil},
		{"two-branch oneOf introduced", compat.JSONSchema, `{"type":"string"}`, `{"oneOf":[{"type":"string"},{"type":"null"}]}`,
			[]string{` SUM_TYPE_EXTENDED {"type":"string"} {"oneOf":[{"type":"string"},{"type":"null"}]}`}},
		{"long values are cut", compat.JSONSchema, `{"description":"` + long + `"}`, `{"description":"` + long + `a"}`,
			[]string{`/description DESCRIPTION_CHANGED "` + long + `" "` + long[:116] + `...`}},
		{"avro record without a namespace renamed", compat.Avro,
			`{"type":"record","name":"Payment","fields":[]}`, `{"type":"record","name":"Charge","fields":[]}`,
			[]string{`/name NAME_MISMATCH Payment Charge`}},
		{"avro field made nullable", compat.Avro, rec(`{"name":"n","type":"string"}`), rec(`{"name":"n","type":["null","string"],"default":null}`),
			[]string{`/fields/0/default DEFAULT_CHANGED  null`, `/fields/0/type TYPE_CHANGED_TO_UNION string ["null","string"]`}},
		{"avro change inside a union branch", compat.Avro,
			rec(`{"name":"card","type":["null",` + card(`{"name":"id","type":"string"}`) + `]}`),
			rec(`{"name":"card","type":["null",` + card(`{"name":"id","type":"string"},{"name":"brand","type":"string"}`) + `]}`),
			[]string{`/fields/0/type/1/fields/1 READER_FIELD_MISSING_DEFAULT_VALUE  brand`}},
	} {
		changes, err := compat.Diff(tc.format, []byte(tc.old), []byte(tc.new))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, c := range changes {
			got = append(got, c.Pointer+" "+c.Rule+" "+c.Old+" "+c.New)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got  %q\n want %q", tc.name, got, tc.want)
		}
	}
}

func TestIdenticalAndReformattedSchemasHaveNoChanges(t *testing.T) {
	for _, tc := range changeCases {
		changes, err := compat.Diff(tc.format, []byte(tc.new), []byte(" \n"+tc.new+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) != 0 {
			t.Errorf("%s: a schema differs from itself: %v", tc.name, rules(changes))
		}
	}
}

func TestEventVersionConstIsNotAChange(t *testing.T) {
	v1 := obj(true, `"event_version"`, `"event_version":{"const":1}`)
	v2 := obj(true, `"event_version"`, `"event_version":{"const":2}`)
	changes, err := compat.DiffJSONSchema([]byte(v1), []byte(v2))
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 0 {
		t.Fatalf("event_version bump reported: %v", rules(changes))
	}
}

func TestTransitiveModesCompareWithEveryEarlierVersion(t *testing.T) {
	for _, tc := range []struct {
		mode compat.Mode
		n    int
		want []int
	}{
		{compat.Backward, 3, []int{2}},
		{compat.BackwardTransitive, 3, []int{0, 1, 2}},
		{compat.Forward, 2, []int{1}},
		{compat.FullTransitive, 2, []int{0, 1}},
		{compat.None, 3, nil},
		{compat.Full, 0, nil},
	} {
		if got := tc.mode.Against(tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("%s.Against(%d) = %v, want %v", tc.mode, tc.n, got, tc.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	if m, err := compat.ParseMode("full_transitive"); err != nil || m != compat.FullTransitive {
		t.Errorf("ParseMode(full_transitive) = %v, %v", m, err)
	}
	if m, err := compat.ParseMode(""); err != nil || m != compat.Backward {
		t.Errorf("ParseMode(\"\") = %v, %v; want BACKWARD, the registry default", m, err)
	}
	if _, err := compat.ParseMode("SIDEWAYS"); err == nil {
		t.Error("ParseMode(SIDEWAYS) succeeded")
	}
}

func TestFirstDifferenceIgnoresWhitespaceAndKeyOrder(t *testing.T) {
	a := []byte(`{"a":1,"b":{"c":[1,2]}}`)
	if _, differ, err := compat.FirstDifference(a, []byte("{ \"b\": {\"c\": [1, 2]},\n  \"a\": 1 }")); err != nil || differ {
		t.Errorf("reformatted document differs (err %v)", err)
	}
	ptr, differ, err := compat.FirstDifference(a, []byte(`{"a":1,"b":{"c":[1,3]}}`))
	if err != nil || !differ || ptr != "/b/c/1" {
		t.Errorf("FirstDifference = %q, %v, %v; want /b/c/1", ptr, differ, err)
	}
	longer := []byte(`{"a":1,"b":{"c":[1,2,3]}}`)
	for _, pair := range [][2][]byte{{a, longer}, {longer, a}} {
		ptr, differ, err := compat.FirstDifference(pair[0], pair[1])
		if err != nil || !differ || ptr != "/b/c/2" {
			t.Errorf("FirstDifference(%s, %s) = %q, %v, %v; want /b/c/2", pair[0], pair[1], ptr, differ, err)
		}
	}
}

// Avro fields are matched by name: a record with a nameless or repeated
// field cannot be compared, and says so instead of inventing changes.
func TestDiffAvroRefusesFieldsWithoutAnIdentity(t *testing.T) {
	for name, schema := range map[string]string{
		"nameless field": `{"type":"record","name":"R","fields":[{"type":"string"},{"type":"string"}]}`,
		"repeated field": `{"type":"record","name":"R","fields":[{"name":"a","type":"string"},{"name":"a","type":"long"}]}`,
		"distinct names": `{"type":"record","name":"R","fields":[{"name":"a","type":"string"},{"name":"b","type":"long"}]}`,
	} {
		_, err := compat.DiffAvro([]byte(schema), []byte(schema))
		if ok := name == "distinct names"; ok != (err == nil) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
