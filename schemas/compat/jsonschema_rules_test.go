package compat

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// ruleCase is one JSON Schema edit with the verdicts Confluent Schema
// Registry gives it: BACKWARD compares old (original) with new (update),
// FORWARD the other way round, FULL is both. rule is the Confluent
// difference type the edit must produce ("" when it produces none).
type ruleCase struct {
	name              string
	old, new          string
	rule              string
	backward, forward bool
}

// arr and objc build array and object schemas for the table.
func arr(kw string) string  { return `{"type":"array",` + kw + `}` }
func objc(kw string) string { return `{"type":"object",` + kw + `}` }

const (
	str  = `{"type":"string"}`
	num  = `{"type":"number"}`
	intg = `{"type":"integer"}`
)

var ruleCases = []ruleCase{
	// not
	{"not narrowed", `{"not":{"type":["string","null"]}}`, `{"not":{"type":"string"}}`, "NOT_TYPE_NARROWED", true, false},
	{"not extended", `{"not":{"type":"string"}}`, `{"not":{"type":["string","null"]}}`, "NOT_TYPE_EXTENDED", false, true},
	{"not added beside a type", str, `{"type":"string","not":{"const":""}}`, "TYPE_CHANGED", false, true},
	{"not removed beside a type", `{"type":"string","not":{"const":""}}`, str, "PRODUCT_TYPE_NARROWED", true, false},

	// dependencies, dependentRequired, dependentSchemas
	{"dependentRequired added", objc(`"properties":{"a":{},"b":{}}`), objc(`"properties":{"a":{},"b":{}},"dependentRequired":{"a":["b"]}`), "DEPENDENCY_ARRAY_ADDED", false, true},
	{"dependentRequired removed", objc(`"properties":{"a":{},"b":{}},"dependentRequired":{"a":["b"]}`), objc(`"properties":{"a":{},"b":{}}`), "DEPENDENCY_ARRAY_REMOVED", true, false},
	{"dependentRequired extended", objc(`"dependentRequired":{"a":["b"]}`), objc(`"dependentRequired":{"a":["b","c"]}`), "DEPENDENCY_ARRAY_EXTENDED", false, true},
	{"dependentRequired narrowed", objc(`"dependentRequired":{"a":["b","c"]}`), objc(`"dependentRequired":{"a":["b"]}`), "DEPENDENCY_ARRAY_NARROWED", true, false},
	{"dependentRequired changed", objc(`"dependentRequired":{"a":["b"]}`), objc(`"dependentRequired":{"a":["c"]}`), "DEPENDENCY_ARRAY_CHANGED", false, false},
	{"draft 7 dependencies array added", objc(`"properties":{"a":{}}`), objc(`"properties":{"a":{}},"dependencies":{"a":["b"]}`), "DEPENDENCY_ARRAY_ADDED", false, true},
	{"dependentSchemas added", objc(`"properties":{"a":{}}`), objc(`"properties":{"a":{}},"dependentSchemas":{"a":{"required":["b"]}}`), "DEPENDENCY_SCHEMA_ADDED", false, true},
	{"dependentSchemas removed", objc(`"dependentSchemas":{"a":{"required":["b"]}}`), objc(`"properties":{}`), "DEPENDENCY_SCHEMA_REMOVED", true, false},
	{"dependentSchemas changed inside", objc(`"dependentSchemas":{"a":{"properties":{"b":{"type":"string"}}}}`), objc(`"dependentSchemas":{"a":{"properties":{"b":{"type":"integer"}}}}`), "TYPE_CHANGED", false, false},
	{"draft 7 dependencies schema removed", objc(`"dependencies":{"a":{"required":["b"]}}`), objc(`"properties":{}`), "DEPENDENCY_SCHEMA_REMOVED", true, false},

	// oneOf / anyOf / allOf
	{"one-branch oneOf introduced", str, `{"oneOf":[{"type":"string"}]}`, "", true, true},
	{"one-branch oneOf removed", `{"oneOf":[{"type":"string"}]}`, str, "", true, true},
	{"one-branch oneOf around a narrowed type", num, `{"oneOf":[{"type":"integer"}]}`, "TYPE_CHANGED", false, true},
	{"one-branch anyOf became oneOf", `{"anyOf":[{"type":"string"}]}`, `{"oneOf":[{"type":"string"}]}`, "COMBINED_TYPE_EXTENDED", true, true},
	{"anyOf branch added", `{"anyOf":[{"type":"string"},{"type":"null"}]}`, `{"anyOf":[{"type":"string"},{"type":"null"},{"type":"integer"}]}`, "SUM_TYPE_EXTENDED", true, false},
	{"oneOf branch removed", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"}]}`, "SUM_TYPE_NARROWED", false, true},
	{"type widened into an anyOf", str, `{"anyOf":[{"type":"string"},{"type":"null"}]}`, "SUM_TYPE_EXTENDED", true, false},
	{"oneOf branch loosened in place", `{"oneOf":[{"type":"string","maxLength":5},{"type":"integer"}]}`, `{"oneOf":[{"type":"string","maxLength":10},{"type":"integer"}]}`, "MAX_LENGTH_INCREASED", true, false},
	{"oneOf branch changed to a type no old branch reads", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"},{"type":"boolean"}]}`, "COMBINED_TYPE_SUBSCHEMAS_CHANGED", false, false},
	{"oneOf branches reordered", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"integer"},{"type":"string"}]}`, "", true, true},
	{"duplicate oneOf branches collapsed", `{"oneOf":[{"type":"string"},{"type":"string"}]}`, `{"oneOf":[{"type":"string"}]}`, "", true, true},
	{"anyOf became oneOf", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, "COMBINED_TYPE_CHANGED", false, true},
	{"allOf became anyOf", `{"allOf":[{"type":"string"},{"maxLength":5}]}`, `{"anyOf":[{"type":"string"},{"maxLength":5}]}`, "COMBINED_TYPE_EXTENDED", true, false},
	{"allOf branch removed", `{"allOf":[{"type":"string"},{"maxLength":5}]}`, `{"allOf":[{"type":"string"}]}`, "PRODUCT_TYPE_NARROWED", true, false},
	{"allOf replaced by one of its branches", `{"allOf":[{"type":"string"},{"maxLength":5}]}`, str, "PRODUCT_TYPE_NARROWED", true, false},

	// arrays: items, prefixItems, additionalItems, unevaluatedItems
	{"items schema added", `{"type":"array"}`, arr(`"items":{"type":"string"}`), "SCHEMA_ADDED", false, true},
	{"items schema removed", arr(`"items":{"type":"string"}`), `{"type":"array"}`, "SCHEMA_REMOVED", true, false},
	{"items schema narrowed", arr(`"items":{"type":"number"}`), arr(`"items":{"type":"integer"}`), "TYPE_NARROWED", false, true},
	{"item added to an open tuple", arr(`"prefixItems":[{"type":"string"}]`), arr(`"prefixItems":[{"type":"string"},{"type":"integer"}]`), "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", false, true},
	{"item removed from an open tuple", arr(`"prefixItems":[{"type":"string"},{"type":"integer"}]`), arr(`"prefixItems":[{"type":"string"}]`), "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", true, false},
	{"empty item added to an open tuple", arr(`"prefixItems":[{"type":"string"}]`), arr(`"prefixItems":[{"type":"string"},{}]`), "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", true, true},
	{"item added to a closed tuple", arr(`"prefixItems":[{"type":"string"}],"items":false`), arr(`"prefixItems":[{"type":"string"},{"type":"integer"}],"items":false`), "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", true, false},
	{"item removed from a closed tuple", arr(`"prefixItems":[{"type":"string"},{"type":"integer"}],"items":false`), arr(`"prefixItems":[{"type":"string"}],"items":false`), "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", false, true},
	{"false item removed from a closed tuple", arr(`"prefixItems":[{"type":"string"},false],"items":false`), arr(`"prefixItems":[{"type":"string"}],"items":false`), "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", true, true},
	{"draft 7 item added to a closed tuple", arr(`"items":[{"type":"string"}],"additionalItems":false`), arr(`"items":[{"type":"string"},{"type":"integer"}],"additionalItems":false`), "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", true, false},
	{"item added, covered by the partly open tuple", arr(`"prefixItems":[{"type":"string"}],"items":{"type":"number"}`), arr(`"prefixItems":[{"type":"string"},{"type":"number"}],"items":{"type":"number"}`), "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", true, true},
	{"item added, not covered by the partly open tuple", arr(`"prefixItems":[{"type":"string"}],"items":{"type":"string"}`), arr(`"prefixItems":[{"type":"string"},{"type":"integer"}],"items":{"type":"string"}`), "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", false, false},
	{"item removed, covered by the partly open tuple", arr(`"prefixItems":[{"type":"string"},{"type":"integer"}],"items":{"type":"number"}`), arr(`"prefixItems":[{"type":"string"}],"items":{"type":"number"}`), "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", true, false},
	{"item removed, not covered by the partly open tuple", arr(`"prefixItems":[{"type":"string"},{"type":"integer"}],"items":{"type":"string"}`), arr(`"prefixItems":[{"type":"string"}],"items":{"type":"string"}`), "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", false, false},
	{"closed tuple opened", arr(`"prefixItems":[{"type":"string"}],"items":false`), arr(`"prefixItems":[{"type":"string"}]`), "ADDITIONAL_ITEMS_ADDED", true, false},
	{"open tuple closed", arr(`"prefixItems":[{"type":"string"}]`), arr(`"prefixItems":[{"type":"string"}],"items":false`), "ADDITIONAL_ITEMS_REMOVED", false, true},
	{"open tuple partly closed", arr(`"prefixItems":[{"type":"string"}]`), arr(`"prefixItems":[{"type":"string"}],"items":{"type":"string"}`), "ADDITIONAL_ITEMS_NARROWED", false, true},
	{"partly open tuple opened", arr(`"prefixItems":[{"type":"string"}],"items":{"type":"string"}`), arr(`"prefixItems":[{"type":"string"}]`), "ADDITIONAL_ITEMS_EXTENDED", true, false},
	{"draft 7 additionalItems narrowed", arr(`"items":[{"type":"string"}],"additionalItems":{"type":"number"}`), arr(`"items":[{"type":"string"}],"additionalItems":{"type":"integer"}`), "TYPE_NARROWED", false, true},
	{"unevaluatedItems false added", arr(`"prefixItems":[{"type":"string"}]`), arr(`"prefixItems":[{"type":"string"}],"unevaluatedItems":false`), "UNEVALUATED_ITEMS_REMOVED", false, true},
	{"unevaluatedItems false removed", arr(`"prefixItems":[{"type":"string"}],"unevaluatedItems":false`), arr(`"prefixItems":[{"type":"string"}]`), "UNEVALUATED_ITEMS_ADDED", true, false},
	{"unevaluatedItems schema added", arr(`"prefixItems":[{"type":"string"}]`), arr(`"prefixItems":[{"type":"string"}],"unevaluatedItems":{"type":"string"}`), "UNEVALUATED_ITEMS_NARROWED", false, true},
	{"unevaluatedItems schema removed", arr(`"prefixItems":[{"type":"string"}],"unevaluatedItems":{"type":"string"}`), arr(`"prefixItems":[{"type":"string"}]`), "UNEVALUATED_ITEMS_EXTENDED", true, false},
	{"unevaluatedItems schema narrowed", arr(`"unevaluatedItems":{"type":"number"}`), arr(`"unevaluatedItems":{"type":"integer"}`), "TYPE_NARROWED", false, true},
	{"item added, covered by unevaluatedItems", arr(`"prefixItems":[{"type":"string"}],"unevaluatedItems":{"type":"number"}`), arr(`"prefixItems":[{"type":"string"},{"type":"number"}],"unevaluatedItems":{"type":"number"}`), "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", true, true},
	{"item added to a tuple closed by unevaluatedItems", arr(`"prefixItems":[{"type":"string"}],"unevaluatedItems":false`), arr(`"prefixItems":[{"type":"string"},{"type":"integer"}],"unevaluatedItems":false`), "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", true, false},
	{"items false added", `{"type":"array"}`, arr(`"items":false`), "ADDITIONAL_ITEMS_REMOVED", false, true},

	// unevaluatedProperties and content models
	{"unevaluatedProperties false added", objc(`"properties":{"a":{}}`), objc(`"properties":{"a":{}},"unevaluatedProperties":false`), "UNEVALUATED_PROPERTIES_REMOVED", false, true},
	{"unevaluatedProperties false removed", objc(`"properties":{"a":{}},"unevaluatedProperties":false`), objc(`"properties":{"a":{}}`), "UNEVALUATED_PROPERTIES_ADDED", true, false},
	{"unevaluatedProperties schema added", objc(`"properties":{"a":{}}`), objc(`"properties":{"a":{}},"unevaluatedProperties":{"type":"string"}`), "UNEVALUATED_PROPERTIES_NARROWED", false, true},
	{"unevaluatedProperties schema removed", objc(`"properties":{"a":{}},"unevaluatedProperties":{"type":"string"}`), objc(`"properties":{"a":{}}`), "UNEVALUATED_PROPERTIES_EXTENDED", true, false},
	{"unevaluatedProperties schema narrowed", objc(`"unevaluatedProperties":{"type":"number"}`), objc(`"unevaluatedProperties":{"type":"integer"}`), "TYPE_NARROWED", false, true},
	{"optional property added, closed by unevaluatedProperties", objc(`"properties":{"a":{}},"unevaluatedProperties":false`), objc(`"properties":{"a":{},"b":{"type":"string"}},"unevaluatedProperties":false`), "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", true, false},
	{"property added, covered by unevaluatedProperties", objc(`"unevaluatedProperties":{"type":"string"}`), objc(`"properties":{"b":{"type":"string"}},"unevaluatedProperties":{"type":"string"}`), "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", true, true},
	{"property added, not covered by unevaluatedProperties", objc(`"unevaluatedProperties":{"type":"string"}`), objc(`"properties":{"b":{"type":"integer"}},"unevaluatedProperties":{"type":"string"}`), "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", false, false},
	{"property removed, covered by a pattern", objc(`"properties":{"s_a":{"type":"string"}},"patternProperties":{"^s_":{"type":"string"}},"additionalProperties":false`), objc(`"patternProperties":{"^s_":{"type":"string"}},"additionalProperties":false`), "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", true, true},
	{"property removed, not covered by a pattern", objc(`"properties":{"s_a":{"type":"integer"}},"patternProperties":{"^s_":{"type":"string"}},"additionalProperties":false`), objc(`"patternProperties":{"^s_":{"type":"string"}},"additionalProperties":false`), "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", false, false},
	{"pattern property narrowed", objc(`"patternProperties":{"^x":{"type":"number"}}`), objc(`"patternProperties":{"^x":{"type":"integer"}}`), "TYPE_NARROWED", false, true},
	{"required property added to an open object", objc(`"properties":{"a":{}}`), objc(`"properties":{"a":{},"b":{"type":"string"}},"required":["b"]`), "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", false, true},
	{"required property with default added to an open object", objc(`"properties":{"a":{}}`), objc(`"properties":{"a":{},"b":{"type":"string","default":""}},"required":["b"]`), "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL", false, true},
	{"additionalProperties schema added", objc(`"properties":{"a":{}}`), objc(`"properties":{"a":{}},"additionalProperties":{"type":"string"}`), "ADDITIONAL_PROPERTIES_NARROWED", false, true},
	{"additionalProperties schema removed", objc(`"properties":{"a":{}},"additionalProperties":{"type":"string"}`), objc(`"properties":{"a":{}}`), "ADDITIONAL_PROPERTIES_EXTENDED", true, false},

	// contains, minContains, maxContains
	{"contains schema changed", arr(`"contains":{"type":"string"}`), arr(`"contains":{"type":"integer"}`), "KEYWORD_CHANGED", false, false},

	// required
	{"property made required", objc(`"properties":{"a":{}}`), objc(`"properties":{"a":{}},"required":["a"]`), "REQUIRED_ATTRIBUTE_ADDED", false, true},
	{"property made optional", objc(`"properties":{"a":{}},"required":["a"]`), objc(`"properties":{"a":{}}`), "REQUIRED_ATTRIBUTE_REMOVED", true, false},
	{"property with default made required", objc(`"properties":{"a":{"default":1}}`), objc(`"properties":{"a":{"default":1}},"required":["a"]`), "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", true, true},
	{"undeclared name made required", objc(`"required":["a"]`), objc(`"required":["a","b"]`), "REQUIRED_ATTRIBUTE_ADDED", false, true},
	{"required reordered", objc(`"properties":{"a":{},"b":{}},"required":["a","b"]`), objc(`"properties":{"a":{},"b":{}},"required":["b","a"]`), "", true, true},
}

// limits lists each numeric keyword, the kind of schema it constrains and
// whether a larger value loosens it; limitCases makes the four edits of
// each (added, removed, increased, decreased).
var limits = []struct {
	key, rule, schema string
	largerLoosens     bool
}{
	{"maxLength", "MAX_LENGTH", `"type":"string"`, true}, {"minLength", "MIN_LENGTH", `"type":"string"`, false},
	{"maximum", "MAXIMUM", `"type":"number"`, true}, {"minimum", "MINIMUM", `"type":"number"`, false},
	{"exclusiveMaximum", "EXCLUSIVE_MAXIMUM", `"type":"number"`, true}, {"exclusiveMinimum", "EXCLUSIVE_MINIMUM", `"type":"number"`, false},
	{"maxProperties", "MAX_PROPERTIES", `"type":"object"`, true}, {"minProperties", "MIN_PROPERTIES", `"type":"object"`, false},
	{"maxItems", "MAX_ITEMS", `"type":"array"`, true}, {"minItems", "MIN_ITEMS", `"type":"array"`, false},
	{"maxContains", "MAX_CONTAINS", `"type":"array","contains":{"type":"string"}`, true}, {"minContains", "MIN_CONTAINS", `"type":"array","contains":{"type":"string"}`, false},
}

func limitCases() []ruleCase {
	var out []ruleCase
	for _, l := range limits {
		with := func(v int) string { return fmt.Sprintf(`{%s,%q:%d}`, l.schema, l.key, v) }
		without := `{` + l.schema + `}`
		// A limit added constrains old data; removed, it frees new data.
		out = append(out,
			ruleCase{l.key + " added", without, with(5), l.rule + "_ADDED", false, true},
			ruleCase{l.key + " removed", with(5), without, l.rule + "_REMOVED", true, false},
			ruleCase{l.key + " increased", with(5), with(8), l.rule + "_INCREASED", l.largerLoosens, !l.largerLoosens},
			ruleCase{l.key + " decreased", with(5), with(2), l.rule + "_DECREASED", !l.largerLoosens, l.largerLoosens},
		)
	}
	return append(out,
		ruleCase{"multipleOf added", num, `{"type":"number","multipleOf":2}`, "MULTIPLE_OF_ADDED", false, true},
		ruleCase{"multipleOf removed", `{"type":"number","multipleOf":2}`, num, "MULTIPLE_OF_REMOVED", true, false},
		ruleCase{"multipleOf expanded", `{"type":"number","multipleOf":2}`, `{"type":"number","multipleOf":4}`, "MULTIPLE_OF_EXPANDED", false, true},
		ruleCase{"multipleOf reduced", `{"type":"number","multipleOf":4}`, `{"type":"number","multipleOf":2}`, "MULTIPLE_OF_REDUCED", true, false},
		ruleCase{"multipleOf changed", `{"type":"number","multipleOf":2}`, `{"type":"number","multipleOf":3}`, "MULTIPLE_OF_CHANGED", false, false},
		ruleCase{"id changed", `{"$id":"a"}`, `{"$id":"b"}`, "ID_CHANGED", true, true},
		ruleCase{"title changed", `{"title":"a"}`, `{"title":"b"}`, "TITLE_CHANGED", true, true},
		ruleCase{"default changed", `{"type":"string","default":"a"}`, `{"type":"string","default":"b"}`, "DEFAULT_CHANGED", true, true},
		ruleCase{"schema false opened", `{"properties":{"a":false}}`, `{"properties":{"a":{"type":"string"}}}`, "TYPE_CHANGED", true, false},
		ruleCase{"unique items removed", arr(`"uniqueItems":true`), arr(`"uniqueItems":false`), "UNIQUE_ITEMS_REMOVED", true, false},
		ruleCase{"property with false removed from closed object", objc(`"properties":{"a":false},"additionalProperties":false`), objc(`"additionalProperties":false`), "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", true, true},
		ruleCase{"required property with default added to closed object", objc(`"additionalProperties":false`), objc(`"properties":{"a":{"type":"string","default":""}},"required":["a"],"additionalProperties":false`), "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", true, false},
		ruleCase{"open object closed", objc(`"properties":{}`), objc(`"additionalProperties":false`), "ADDITIONAL_PROPERTIES_REMOVED", false, true},
		ruleCase{"description changed", `{"type":"string","description":"a"}`, `{"type":"string","description":"b"}`, "DESCRIPTION_CHANGED", true, true},
		ruleCase{"enum value added", `{"enum":["a"]}`, `{"enum":["a","b"]}`, "ENUM_ARRAY_EXTENDED", true, false},
		ruleCase{"enum value removed", `{"enum":["a","b"]}`, `{"enum":["a"]}`, "ENUM_ARRAY_NARROWED", false, true},
		ruleCase{"enum value replaced", `{"enum":["a","b"]}`, `{"enum":["a","c"]}`, "ENUM_ARRAY_CHANGED", false, false},
		ruleCase{"pattern added", str, `{"type":"string","pattern":"^a"}`, "PATTERN_ADDED", false, true},
		ruleCase{"pattern removed", `{"type":"string","pattern":"^a"}`, str, "PATTERN_REMOVED", true, false},
		ruleCase{"pattern changed", `{"type":"string","pattern":"^a"}`, `{"type":"string","pattern":"^b"}`, "PATTERN_CHANGED", false, false},
		ruleCase{"allOf branch added", `{"allOf":[{"type":"string"}]}`, `{"allOf":[{"type":"string"},{"maxLength":3}]}`, "PRODUCT_TYPE_EXTENDED", false, true},
		ruleCase{"integer widened to number", intg, num, "TYPE_EXTENDED", true, false},
		ruleCase{"number narrowed to integer", num, intg, "TYPE_NARROWED", false, true},
		ruleCase{"unique items added", arr(`"uniqueItems":false`), arr(`"uniqueItems":true`), "UNIQUE_ITEMS_ADDED", false, true},
		ruleCase{"empty property added to open object", objc(`"properties":{}`), objc(`"properties":{"a":{}}`), "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", true, true},
		ruleCase{"optional property added to open object", objc(`"properties":{}`), objc(`"properties":{"a":{"type":"string"}}`), "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", false, true},
		ruleCase{"property removed from open object", objc(`"properties":{"a":{"type":"string"}}`), objc(`"properties":{}`), "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", true, false},
		ruleCase{"required property added to closed object", objc(`"additionalProperties":false`), objc(`"properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false`), "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", false, false},
		ruleCase{"property removed from closed object", objc(`"properties":{"a":{"type":"string"}},"additionalProperties":false`), objc(`"additionalProperties":false`), "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", false, true},
		ruleCase{"closed object opened", objc(`"additionalProperties":false`), objc(`"properties":{}`), "ADDITIONAL_PROPERTIES_ADDED", true, false},
	)
}

// TestConfluentRulesPerMode holds every rule to its verdict under each
// mode: BACKWARD and FORWARD as the table says, FULL when both hold, NONE
// always, transitive modes as their plain ones for one earlier version.
func TestConfluentRulesPerMode(t *testing.T) {
	for _, tc := range append(slices.Clone(ruleCases), limitCases()...) {
		t.Run(tc.name, func(t *testing.T) {
			changes, err := DiffJSONSchema([]byte(tc.old), []byte(tc.new))
			if err != nil {
				t.Fatal(err)
			}
			if tc.rule == "" && len(changes) != 0 {
				t.Errorf("want no change, got %s", describe(changes))
			}
			if tc.rule != "" && !slices.ContainsFunc(changes, func(c Change) bool { return c.Rule == tc.rule }) {
				t.Errorf("rule %s not reported; got %s", tc.rule, describe(changes))
			}
			for mode, ok := range map[Mode]bool{
				Backward: tc.backward, BackwardTransitive: tc.backward, Forward: tc.forward, ForwardTransitive: tc.forward,
				Full: tc.backward && tc.forward, FullTransitive: tc.backward && tc.forward, None: true,
			} {
				if got := len(mode.Incompatible(changes)) == 0; got != ok {
					t.Errorf("%s: compatible = %v, want %v (changes %s)", mode, got, ok, describe(changes))
				}
			}
		})
	}
}

// TestEveryJSONSchemaRuleHasACase: every difference type the engine can
// report appears as the expected rule of a table case.
func TestEveryJSONSchemaRuleHasACase(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range append(slices.Clone(ruleCases), limitCases()...) {
		covered[tc.rule] = true
	}
	var missing []string
	for _, rule := range sortedKeys(boolKeys(compatibleRules), stringKeys(ruleHints)) {
		if !covered[rule] {
			missing = append(missing, rule)
		}
	}
	if len(missing) > 0 {
		t.Errorf("rules without a case: %s", strings.Join(missing, ", "))
	}
}

func boolKeys(m map[string]bool) map[string]any {
	out := map[string]any{}
	for k := range m {
		out[k] = true
	}
	return out
}

func stringKeys(m map[string]string) map[string]any {
	out := map[string]any{}
	for k := range m {
		out[k] = true
	}
	return out
}

func describe(cs []Change) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Pointer+" "+c.Rule+" ["+c.Class()+"]")
	}
	return strings.Join(out, "; ")
}
