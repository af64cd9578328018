package compat

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// DiffJSONSchema lists the changes between two JSON Schema documents with
// Confluent's rule names. Local references ("#/$defs/x") are followed;
// keywords the engine does not model (if/then/else, not, dependent*,
// contains, unevaluated*) are compared as opaque values and any change to
// them is reported as KEYWORD_CHANGED, breaking both directions.
//
// Changes to the envelope's event_version constant are expected between
// versions of one event and are not reported; everything else is.
func DiffJSONSchema(old, new []byte) ([]Change, error) {
	o, err := decode(old)
	if err != nil {
		return nil, fmt.Errorf("old schema: %w", err)
	}
	n, err := decode(new)
	if err != nil {
		return nil, fmt.Errorf("new schema: %w", err)
	}
	steps := maxDiffSteps
	d := &jsonDiff{oldRoot: o, newRoot: n, inProgress: map[[2]string]bool{}, steps: &steps}
	d.schema(o, n, "")
	if steps < 0 {
		return nil, fmt.Errorf("schemas too complex to compare: more than %d subschema comparisons", maxDiffSteps)
	}
	return d.changes, nil
}

// maxDiffSteps bounds the subschema comparisons of one diff. A reference
// used at several places is compared at each, so references that each use
// the next one twice cost 2^n comparisons; a few hundred bytes of such a
// schema would keep Diff busy for years. Any pair of our event schemas
// takes fewer than 30.
const maxDiffSteps = 10_000

// jsonDiff walks two schemas side by side and collects changes.
type jsonDiff struct {
	oldRoot, newRoot any
	changes          []Change
	inProgress       map[[2]string]bool // $ref pairs being compared, for recursive schemas
	steps            *int               // comparisons left, shared with the sub-diffs of compatible; below 0: gave up
}

func (d *jsonDiff) add(ptr, rule string, old, new any, breaksBackward, breaksForward bool, hint string) {
	c := Change{Pointer: ptr, Rule: rule, BreaksBackward: breaksBackward, BreaksForward: breaksForward, Hint: hint}
	if old != absent {
		c.Old = compact(old)
	}
	if new != absent {
		c.New = compact(new)
	}
	d.changes = append(d.changes, c)
}

// absent marks a keyword missing from one side.
var absent any = struct{ absent bool }{true}

func get(m map[string]any, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return absent
}

// object returns the schema as a keyword map; true and {} are the empty
// map, false is {"not": {}}.
func object(s any) map[string]any {
	switch x := s.(type) {
	case map[string]any:
		return x
	case bool:
		if !x {
			return map[string]any{"not": map[string]any{}}
		}
	}
	return map[string]any{}
}

// isEmpty reports whether a schema accepts every value.
func isEmpty(s any) bool {
	if s == absent {
		return true
	}
	if b, ok := s.(bool); ok {
		return b
	}
	m, ok := s.(map[string]any)
	if !ok {
		return false
	}
	for k := range m {
		if !isAnnotation(k) {
			return false
		}
	}
	return true
}

// isAnnotation reports whether a keyword only describes: the standard
// annotations, and vendor extensions ("x-…", e.g. contractgen's
// "x-go-type"), which validators ignore as Confluent's checker does.
func isAnnotation(k string) bool { return annotation[k] || strings.HasPrefix(k, "x-") }

// isFalse reports whether a schema rejects every value.
func isFalse(s any) bool {
	b, ok := s.(bool)
	return ok && !b
}

var annotation = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, "$anchor": true,
}

// resolve follows a local $ref; it returns the target and the ref key.
func (d *jsonDiff) resolve(root any, s map[string]any) (map[string]any, string) {
	ref, ok := s["$ref"].(string)
	if !ok || !strings.HasPrefix(ref, "#") {
		return s, ""
	}
	cur := root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return s, ""
		}
		cur = m[tok]
	}
	target := object(cur)
	merged := map[string]any{}
	for k, v := range target {
		merged[k] = v
	}
	for k, v := range s { // siblings of $ref apply too (2020-12)
		if k != "$ref" {
			merged[k] = v
		}
	}
	return merged, ref
}

// compatible reports whether data valid under writer is valid under reader,
// as far as the engine can tell.
func (d *jsonDiff) compatible(writer, reader any) bool {
	sub := &jsonDiff{oldRoot: d.oldRoot, newRoot: d.newRoot, inProgress: map[[2]string]bool{}, steps: d.steps}
	sub.schema(writer, reader, "")
	for _, c := range sub.changes {
		if c.BreaksBackward {
			return false
		}
	}
	return true
}

func (d *jsonDiff) schema(oldS, newS any, ptr string) {
	if *d.steps--; *d.steps < 0 {
		return
	}
	if isFalse(oldS) && !isFalse(newS) {
		d.add(ptr, "SCHEMA_REMOVED", oldS, newS, false, true, "the old schema accepted nothing here; the new one accepts values the old cannot read")
		return
	}
	if isEmpty(oldS) && !isEmpty(newS) && oldS != absent {
		d.add(ptr, "TYPE_NARROWED", oldS, newS, true, false, "the old schema accepted any value here; constrain it in a new property instead")
		return
	}
	o, ro := d.resolve(d.oldRoot, object(oldS))
	n, rn := d.resolve(d.newRoot, object(newS))
	if ro != "" || rn != "" {
		// A pair of references met again inside its own comparison is a
		// recursive schema: the comparison in progress covers it. The key
		// holds no pointer (that grows with every level, so a recursive
		// schema would never meet its key again), and leaves the set when
		// the comparison ends, so a pair used at several places is still
		// compared, and reported, at each.
		key := [2]string{ro, rn}
		if d.inProgress[key] {
			return
		}
		d.inProgress[key] = true
		defer delete(d.inProgress, key)
	}
	d.annotations(o, n, ptr)
	d.types(o, n, ptr)
	d.enums(o, n, ptr)
	d.bounds(o, n, ptr)
	d.strings(o, n, ptr)
	d.objects(o, n, ptr)
	d.arrays(o, n, ptr)
	d.combined(o, n, ptr)
	d.opaque(o, n, ptr)
}

func (d *jsonDiff) annotations(o, n map[string]any, ptr string) {
	for _, k := range []struct{ key, rule string }{
		{"$id", "ID_CHANGED"}, {"title", "TITLE_CHANGED"}, {"description", "DESCRIPTION_CHANGED"}, {"default", "DEFAULT_CHANGED"},
	} {
		ov, nv := get(o, k.key), get(n, k.key)
		if compactOr(ov) != compactOr(nv) {
			d.add(ptr+"/"+k.key, k.rule, ov, nv, false, false, "")
		}
	}
}

func compactOr(v any) string {
	if v == absent {
		return "\x00absent"
	}
	return compact(v)
}

// typeSet is the set of JSON types a schema allows; nil means any.
func typeSet(m map[string]any) map[string]bool {
	switch t := get(m, "type").(type) {
	case string:
		return map[string]bool{t: true}
	case []any:
		out := map[string]bool{}
		for _, x := range t {
			if s, ok := x.(string); ok {
				out[s] = true
			}
		}
		return out
	}
	return nil
}

// covers reports whether set a allows every value set b allows.
func covers(a, b map[string]bool) bool {
	if a == nil {
		return true
	}
	if b == nil {
		return false
	}
	for t := range b {
		if !a[t] && !(t == "integer" && a["number"]) {
			return false
		}
	}
	return true
}

func (d *jsonDiff) types(o, n map[string]any, ptr string) {
	ot, nt := typeSet(o), typeSet(n)
	oc, nc := covers(nt, ot), covers(ot, nt)
	switch {
	case oc && nc:
		return
	case oc:
		d.add(ptr+"/type", "TYPE_EXTENDED", get(o, "type"), get(n, "type"), false, true,
			"old consumers cannot read the new values; fine under BACKWARD, breaks FORWARD")
	case nc:
		d.add(ptr+"/type", "TYPE_NARROWED", get(o, "type"), get(n, "type"), true, false,
			"data already written may have the dropped type; add a new property instead of narrowing this one")
	default:
		d.add(ptr+"/type", "TYPE_CHANGED", get(o, "type"), get(n, "type"), true, true,
			"a type change breaks readers in both directions; add a new property with the new type")
	}
}

// enumSet is the enum (or const) of a schema as canonical strings; nil
// means unrestricted.
func enumSet(m map[string]any) ([]string, any) {
	if c := get(m, "const"); c != absent {
		return []string{compact(c)}, c
	}
	if e, ok := get(m, "enum").([]any); ok {
		out := make([]string, len(e))
		for i, v := range e {
			out[i] = compact(v)
		}
		return out, e
	}
	return nil, absent
}

func (d *jsonDiff) enums(o, n map[string]any, ptr string) {
	oe, ov := enumSet(o)
	ne, nv := enumSet(n)
	key := "/enum"
	if get(n, "const") != absent || (ne == nil && get(o, "const") != absent) {
		key = "/const"
	}
	if ptr == "/properties/event_version" && key == "/const" {
		return // each version of an envelope carries its own number
	}
	switch {
	case oe == nil && ne == nil:
	case oe == nil:
		d.add(ptr+key, "ENUM_ARRAY_NARROWED", ov, nv, true, false, "data already written may hold any value here")
	case ne == nil:
		d.add(ptr+key, "ENUM_ARRAY_EXTENDED", ov, nv, false, true, "old consumers reject values outside the old enum")
	default:
		added, removed := setDiff(ne, oe), setDiff(oe, ne)
		switch {
		case len(added) == 0 && len(removed) == 0:
		case len(removed) == 0:
			d.add(ptr+key, "ENUM_ARRAY_EXTENDED", ov, nv, false, true, "old consumers reject the added values "+strings.Join(added, ", "))
		case len(added) == 0:
			d.add(ptr+key, "ENUM_ARRAY_NARROWED", ov, nv, true, false, "data already written may hold the removed values "+strings.Join(removed, ", "))
		default:
			d.add(ptr+key, "ENUM_ARRAY_CHANGED", ov, nv, true, true, "values were both added and removed; only add values, in a new version")
		}
	}
}

func setDiff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// bound describes one limit keyword: whether a larger value loosens it.
type bound struct {
	key, name     string
	largerLoosens bool
}

var numericBounds = []bound{
	{"maximum", "MAXIMUM", true}, {"exclusiveMaximum", "EXCLUSIVE_MAXIMUM", true},
	{"minimum", "MINIMUM", false}, {"exclusiveMinimum", "EXCLUSIVE_MINIMUM", false},
	{"maxLength", "MAX_LENGTH", true}, {"minLength", "MIN_LENGTH", false},
	{"maxItems", "MAX_ITEMS", true}, {"minItems", "MIN_ITEMS", false},
	{"maxProperties", "MAX_PROPERTIES", true}, {"minProperties", "MIN_PROPERTIES", false},
}

func number(v any) (*big.Rat, bool) {
	r, ok := new(big.Rat).SetString(compact(v))
	return r, ok
}

func (d *jsonDiff) bounds(o, n map[string]any, ptr string) {
	for _, b := range numericBounds {
		ov, nv := get(o, b.key), get(n, b.key)
		p := ptr + "/" + b.key
		switch {
		case ov == absent && nv == absent:
		case ov == absent:
			d.add(p, b.name+"_ADDED", ov, nv, true, false, "data already written may be outside the new limit")
		case nv == absent:
			d.add(p, b.name+"_REMOVED", ov, nv, false, true, "old consumers reject values outside the old limit")
		default:
			x, okx := number(ov)
			y, oky := number(nv)
			if !okx || !oky {
				continue
			}
			switch cmp := y.Cmp(x); {
			case cmp == 0:
			case (cmp > 0) == b.largerLoosens:
				rule := b.name + "_INCREASED"
				if cmp < 0 {
					rule = b.name + "_DECREASED"
				}
				d.add(p, rule, ov, nv, false, true, "the limit was relaxed: old consumers reject the newly allowed values")
			default:
				rule := b.name + "_INCREASED"
				if cmp < 0 {
					rule = b.name + "_DECREASED"
				}
				d.add(p, rule, ov, nv, true, false, "the limit was tightened: data already written may break it")
			}
		}
	}
	ov, nv := get(o, "multipleOf"), get(n, "multipleOf")
	p := ptr + "/multipleOf"
	switch {
	case ov == absent && nv == absent:
	case ov == absent:
		d.add(p, "MULTIPLE_OF_ADDED", ov, nv, true, false, "data already written may not be a multiple")
	case nv == absent:
		d.add(p, "MULTIPLE_OF_REMOVED", ov, nv, false, true, "old consumers reject non-multiples")
	default:
		x, okx := number(ov)
		y, oky := number(nv)
		if !okx || !oky || x.Cmp(y) == 0 {
			return
		}
		switch {
		case new(big.Rat).Quo(x, y).IsInt():
			d.add(p, "MULTIPLE_OF_REDUCED", ov, nv, false, true, "old consumers reject the newly allowed values")
		case new(big.Rat).Quo(y, x).IsInt():
			d.add(p, "MULTIPLE_OF_EXPANDED", ov, nv, true, false, "data already written may not be a multiple of the new value")
		default:
			d.add(p, "MULTIPLE_OF_CHANGED", ov, nv, true, true, "the new multiple neither divides nor is divided by the old one")
		}
	}
}

func (d *jsonDiff) strings(o, n map[string]any, ptr string) {
	for _, k := range []struct{ key, name string }{{"pattern", "PATTERN"}, {"format", "FORMAT"}} {
		ov, nv := get(o, k.key), get(n, k.key)
		p := ptr + "/" + k.key
		switch {
		case compactOr(ov) == compactOr(nv):
		case ov == absent:
			d.add(p, k.name+"_ADDED", ov, nv, true, false, "data already written may not match; validate it in a new property")
		case nv == absent:
			d.add(p, k.name+"_REMOVED", ov, nv, false, true, "old consumers reject values that do not match the old "+k.key)
		default:
			d.add(p, k.name+"_CHANGED", ov, nv, true, true, "a changed "+k.key+" breaks readers in both directions")
		}
	}
}

// contentModel is how an object schema treats properties it does not name.
type contentModel int

const (
	openModel    contentModel = iota // additionalProperties absent or true
	closedModel                      // additionalProperties false
	partialModel                     // additionalProperties is a schema, or patternProperties constrain names
)

func modelOf(m map[string]any) (contentModel, any) {
	ap := get(m, "additionalProperties")
	switch {
	case isFalse(ap):
		return closedModel, ap
	case isEmpty(ap) && get(m, "patternProperties") == absent:
		return openModel, ap
	}
	return partialModel, ap
}

func stringSet(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func (d *jsonDiff) objects(o, n map[string]any, ptr string) {
	op, _ := get(o, "properties").(map[string]any)
	np, _ := get(n, "properties").(map[string]any)
	oreq, nreq := stringSet(get(o, "required")), stringSet(get(n, "required"))
	om, oap := modelOf(o)
	nm, nap := modelOf(n)

	// The content model itself.
	app := ptr + "/additionalProperties"
	switch {
	case om == nm && om != partialModel:
	case om == partialModel && nm == partialModel:
		d.schema(oap, nap, app)
	case om == closedModel || nm == openModel:
		d.add(app, "ADDITIONAL_PROPERTIES_ADDED", oap, nap, false, true, "old consumers reject the properties the new schema lets through")
	default:
		d.add(app, "ADDITIONAL_PROPERTIES_REMOVED", oap, nap, true, false, "data already written may carry properties the new schema rejects; keep the content model as it was")
	}

	for _, name := range sortedKeys(op, np) {
		p := ptr + "/properties/" + escape(name)
		ov, inOld := op[name]
		nv, inNew := np[name]
		switch {
		case inOld && inNew:
			d.schema(ov, nv, p)
		case inNew:
			d.propertyAdded(name, nv, om, oap, nm, nreq, n, p)
		default:
			d.propertyRemoved(name, ov, nm, nap, om, oreq, o, p)
		}
	}

	for _, name := range setDiff(nreq, oreq) {
		if _, added := np[name]; added && op[name] == nil {
			continue // reported with the property
		}
		if def := get(object(np[name]), "default"); def != absent {
			d.add(ptr+"/required", "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", get(o, "required"), get(n, "required"), false, false, "")
			continue
		}
		d.add(ptr+"/required", "REQUIRED_ATTRIBUTE_ADDED", get(o, "required"), get(n, "required"), true, false,
			fmt.Sprintf("data already written may lack %q; give it a default or keep it optional", name))
	}
	for _, name := range setDiff(oreq, nreq) {
		if _, removed := op[name]; removed && np[name] == nil {
			continue
		}
		fw := get(object(op[name]), "default") == absent
		d.add(ptr+"/required", "REQUIRED_ATTRIBUTE_REMOVED", get(o, "required"), get(n, "required"), false, fw,
			fmt.Sprintf("old consumers require %q, which new data may lack", name))
	}
}

// propertyAdded judges a property present only in the new schema. Old data
// (read by the new schema) follows the old content model; new data read by
// the old schema falls under the old content model too.
func (d *jsonDiff) propertyAdded(name string, nv any, om contentModel, oap any, _ contentModel, nreq []string, n map[string]any, p string) {
	required := slices.Contains(nreq, name)
	switch om {
	case openModel:
		if isEmpty(nv) && !required {
			d.add(p, "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", absent, nv, false, false, "")
			return
		}
		d.add(p, "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", absent, nv, true, false,
			"the old schema is open (no \"additionalProperties\": false), so data already written may carry \""+name+"\" with any value; close the content model in a new type, or add the property with an empty schema")
	case partialModel:
		if !required && d.compatible(oap, nv) {
			d.add(p, "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", absent, nv, false, !d.compatible(nv, oap), "")
			return
		}
		d.add(p, "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", absent, nv, true, !d.compatible(nv, oap),
			"data already written may carry \""+name+"\" as any value the old additionalProperties allowed")
	case closedModel:
		fw := !isFalse(nv) // the old, closed schema rejects new data that carries the property
		fwHint := ""
		if fw {
			fwHint = "; old consumers (closed content model) reject data carrying it, so this breaks FORWARD"
		}
		switch {
		case !required:
			d.add(p, "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", absent, nv, false, fw, strings.TrimPrefix(fwHint, "; "))
		case get(object(nv), "default") != absent:
			d.add(p, "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", absent, nv, false, fw, strings.TrimPrefix(fwHint, "; "))
		default:
			d.add(p, "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", absent, nv, true, fw,
				"data already written lacks \""+name+"\"; make it optional or give it a default"+fwHint)
		}
	}
}

// propertyRemoved judges a property present only in the old schema.
func (d *jsonDiff) propertyRemoved(name string, ov any, nm contentModel, nap any, _ contentModel, oreq []string, _ map[string]any, p string) {
	required := slices.Contains(oreq, name)
	// FORWARD: the old schema reads new data, which follows the new model.
	var fw bool
	switch nm {
	case openModel:
		fw = !isEmpty(ov) || required
	case partialModel:
		fw = required || !d.compatible(nap, ov)
	case closedModel:
		fw = required && get(object(ov), "default") == absent
	}
	switch nm {
	case openModel:
		d.add(p, "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", ov, absent, false, fw,
			"old consumers still expect \""+name+"\" as the old schema described it; new data may carry anything there")
	case partialModel:
		if d.compatible(ov, nap) {
			d.add(p, "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", ov, absent, false, fw, "")
			return
		}
		d.add(p, "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", ov, absent, true, fw,
			"data already written carries \""+name+"\", which the new additionalProperties rejects")
	case closedModel:
		if isFalse(ov) {
			d.add(p, "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", ov, absent, false, fw, "")
			return
		}
		d.add(p, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", ov, absent, true, fw,
			"data already written may carry \""+name+"\", which the new closed schema rejects; keep the property (it may be deprecated)")
	}
}

func (d *jsonDiff) arrays(o, n map[string]any, ptr string) {
	oi, ni := get(o, "items"), get(n, "items")
	if oi != absent || ni != absent {
		switch {
		case oi == absent:
			d.schema(map[string]any{}, ni, ptr+"/items")
		case ni == absent:
			d.schema(oi, map[string]any{}, ptr+"/items")
		default:
			d.schema(oi, ni, ptr+"/items")
		}
	}
	op, _ := get(o, "prefixItems").([]any)
	np, _ := get(n, "prefixItems").([]any)
	for i := 0; i < len(op) && i < len(np); i++ {
		d.schema(op[i], np[i], fmt.Sprintf("%s/prefixItems/%d", ptr, i))
	}
	for i := len(op); i < len(np); i++ {
		d.add(fmt.Sprintf("%s/prefixItems/%d", ptr, i), "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", absent, np[i], !d.compatible(oi, np[i]), !d.compatible(np[i], oi),
			"data already written may hold any item allowed by the old \"items\" at this position")
	}
	for i := len(np); i < len(op); i++ {
		d.add(fmt.Sprintf("%s/prefixItems/%d", ptr, i), "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", op[i], absent, !d.compatible(op[i], ni), !d.compatible(ni, op[i]),
			"old consumers still expect the removed item at this position")
	}
	ou, nu := get(o, "uniqueItems") == true, get(n, "uniqueItems") == true
	switch {
	case !ou && nu:
		d.add(ptr+"/uniqueItems", "UNIQUE_ITEMS_ADDED", get(o, "uniqueItems"), get(n, "uniqueItems"), true, false, "data already written may repeat items")
	case ou && !nu:
		d.add(ptr+"/uniqueItems", "UNIQUE_ITEMS_REMOVED", get(o, "uniqueItems"), get(n, "uniqueItems"), false, true, "old consumers reject repeated items")
	}
}

// combined compares oneOf, anyOf and allOf. Branches are paired first by
// equal content, then in order; unpaired branches are additions or removals.
func (d *jsonDiff) combined(o, n map[string]any, ptr string) {
	kinds := []string{"oneOf", "anyOf", "allOf"}
	var ok, nk string
	for _, k := range kinds {
		if get(o, k) != absent && ok == "" {
			ok = k
		}
		if get(n, k) != absent && nk == "" {
			nk = k
		}
	}
	if ok == "" && nk == "" {
		return
	}
	if ok != nk {
		switch {
		case ok == "":
			d.add(ptr+"/"+nk, "COMBINED_TYPE_SUBSCHEMAS_CHANGED", absent, get(n, nk), true, true, "a combined type was introduced; introduce it in a new property")
		case nk == "":
			d.add(ptr+"/"+ok, "COMBINED_TYPE_SUBSCHEMAS_CHANGED", get(o, ok), absent, true, true, "a combined type was removed; keep it")
		case ok == "oneOf" && nk == "anyOf":
			d.add(ptr+"/"+nk, "COMBINED_TYPE_EXTENDED", ok, nk, false, true, "anyOf accepts values oneOf rejected")
		default:
			d.add(ptr+"/"+nk, "COMBINED_TYPE_CHANGED", ok, nk, true, true, "the combination keyword changed")
		}
		if ok == "" || nk == "" {
			return
		}
	}
	ob, _ := get(o, ok).([]any)
	nb, _ := get(n, nk).([]any)
	pairs, extraOld, extraNew := pairBranches(ob, nb)
	for _, pr := range pairs {
		d.schema(ob[pr[0]], nb[pr[1]], fmt.Sprintf("%s/%s/%d", ptr, nk, pr[1]))
	}
	product := nk == "allOf"
	for _, i := range extraNew {
		p := fmt.Sprintf("%s/%s/%d", ptr, nk, i)
		if product {
			d.add(p, "PRODUCT_TYPE_EXTENDED", absent, nb[i], true, false, "data already written need not satisfy the added allOf branch")
		} else {
			d.add(p, "SUM_TYPE_EXTENDED", absent, nb[i], false, true, "old consumers reject values of the added branch")
		}
	}
	for _, i := range extraOld {
		p := fmt.Sprintf("%s/%s/%d", ptr, ok, i)
		if product {
			d.add(p, "PRODUCT_TYPE_NARROWED", ob[i], absent, false, true, "old consumers still require the removed allOf branch")
		} else {
			d.add(p, "SUM_TYPE_NARROWED", ob[i], absent, true, false, "data already written may be of the removed branch; keep it")
		}
	}
}

func pairBranches(ob, nb []any) (pairs [][2]int, extraOld, extraNew []int) {
	usedN := make([]bool, len(nb))
	usedO := make([]bool, len(ob))
	for i, o := range ob {
		for j, n := range nb {
			if !usedN[j] && compact(o) == compact(n) {
				usedN[j], usedO[i] = true, true
				pairs = append(pairs, [2]int{i, j})
				break
			}
		}
	}
	j := 0
	for i := range ob {
		if usedO[i] {
			continue
		}
		for j < len(nb) && usedN[j] {
			j++
		}
		if j >= len(nb) || len(ob) != len(nb) {
			extraOld = append(extraOld, i)
			continue
		}
		usedN[j], usedO[i] = true, true
		pairs = append(pairs, [2]int{i, j})
	}
	for j := range nb {
		if !usedN[j] {
			extraNew = append(extraNew, j)
		}
	}
	slices.SortFunc(pairs, func(a, b [2]int) int { return a[1] - b[1] })
	return pairs, extraOld, extraNew
}

// modelled lists the keywords compared structurally; any other keyword is
// compared as a whole.
var modelled = map[string]bool{
	"type": true, "enum": true, "const": true, "properties": true, "required": true,
	"additionalProperties": true, "patternProperties": true, "items": true, "prefixItems": true,
	"uniqueItems": true, "oneOf": true, "anyOf": true, "allOf": true, "pattern": true, "format": true,
	"multipleOf": true, "$ref": true,
}

func (d *jsonDiff) opaque(o, n map[string]any, ptr string) {
	for _, k := range sortedKeys(o, n) {
		if isAnnotation(k) || modelled[k] || isBound(k) {
			continue
		}
		if compactOr(get(o, k)) != compactOr(get(n, k)) {
			d.add(ptr+"/"+escape(k), "KEYWORD_CHANGED", get(o, k), get(n, k), true, true,
				"the engine does not model \""+k+"\"; any change to it is treated as breaking")
		}
	}
	if compactOr(get(o, "patternProperties")) != compactOr(get(n, "patternProperties")) {
		d.add(ptr+"/patternProperties", "KEYWORD_CHANGED", get(o, "patternProperties"), get(n, "patternProperties"), true, true,
			"patternProperties changes are treated as breaking")
	}
}

func isBound(k string) bool {
	for _, b := range numericBounds {
		if b.key == k {
			return true
		}
	}
	return false
}
