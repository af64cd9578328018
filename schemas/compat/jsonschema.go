package compat

import (
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
)

// DiffJSONSchema lists the changes between two JSON Schema documents with
// the rules of Confluent Schema Registry's JSON Schema checker: the same
// difference types (Rule), found the same way, judged the same way.
//
// BreaksBackward is Confluent's verdict on the change: its type is not one
// of the checker's compatible types. FORWARD is judged as Confluent judges
// it, by comparing the other way round (the new schema as the original,
// the old one as the update): a change that makes that comparison fail
// has BreaksForward set, and a failure of the reverse comparison at a
// place the forward one did not report is listed as a change of its own,
// read from new to old (its Hint says so).
//
// Local references ("#/$defs/x") are followed. Keywords Confluent's checker
// does not compare (if/then/else, contains, propertyNames, contentEncoding
// and other non-annotations) are compared as whole values here, and any
// change to them is KEYWORD_CHANGED, breaking both directions: stricter
// than Confluent, which ignores them.
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
	o, n = withoutVersionConst(o), withoutVersionConst(n)
	forward, err := diffOnce(o, n)
	if err != nil {
		return nil, err
	}
	reverse, err := diffOnce(n, o)
	if err != nil {
		return nil, err
	}
	return mergeReverse(forward, reverse), nil
}

// maxDiffSteps bounds the subschema comparisons of one diff. Combinations
// compare every old branch with every new one, and a reference used at
// several places is compared at each, so a few hundred bytes of schema can
// ask for years of work; any pair of our event schemas takes a few hundred.
const maxDiffSteps = 20_000

// diffOnce compares original with update, Confluent's way round: the
// result says whether update reads what original accepted.
func diffOnce(original, update any) ([]Change, error) {
	d := &jsonDiff{
		old: newLoader(original), new: newLoader(update),
		memo: map[[2]string][]Change{}, inProgress: map[[2]string]bool{}, steps: maxDiffSteps,
	}
	var c diffCtx
	d.compare(&c, "", d.old.load(original, ""), d.new.load(update, ""))
	if d.steps < 0 {
		return nil, fmt.Errorf("schemas too complex to compare: more than %d subschema comparisons", maxDiffSteps)
	}
	return c.changes, nil
}

// mergeReverse marks the forward changes the reverse comparison found
// breaking at the same place, and appends the reverse failures found
// nowhere in the forward list.
func mergeReverse(forward, reverse []Change) []Change {
	for _, r := range reverse {
		if !r.BreaksBackward {
			continue
		}
		i := slices.IndexFunc(forward, func(c Change) bool { return c.Pointer == r.Pointer })
		if i >= 0 {
			forward[i].BreaksForward = true
			why := "breaks FORWARD: compared the other way round (the old schema reading new data) this is " + r.Rule
			if forward[i].Hint != "" {
				why = forward[i].Hint + "; " + why
			}
			forward[i].Hint = why
			continue
		}
		forward = append(forward, Change{
			Pointer: r.Pointer, Rule: r.Rule, Old: r.New, New: r.Old, BreaksForward: true,
			Hint: "found only comparing the other way round (the old schema reading new data), as FORWARD does",
		})
	}
	return forward
}

// withoutVersionConst drops the envelope's event_version constant, which
// each version of an event sets to its own number.
func withoutVersionConst(doc any) any {
	m, ok := doc.(map[string]any)
	if !ok {
		return doc
	}
	props, ok := m["properties"].(map[string]any)
	if !ok {
		return doc
	}
	ev, ok := props["event_version"].(map[string]any)
	if !ok {
		return doc
	}
	if _, ok := ev["const"]; !ok {
		return doc
	}
	ev2 := map[string]any{}
	for k, v := range ev {
		if k != "const" {
			ev2[k] = v
		}
	}
	props2 := map[string]any{}
	for k, v := range props {
		props2[k] = v
	}
	props2["event_version"] = ev2
	m2 := map[string]any{}
	for k, v := range m {
		m2[k] = v
	}
	m2["properties"] = props2
	return m2
}

// jsonDiff compares two loaded documents. Results of comparing a pair of
// nodes are memoised relative to the pair, so a combination that compares
// every branch with every other pays once per pair; a pair met again
// while it is being compared is a recursive schema meeting itself, and is
// taken as compatible (the comparison in progress covers it).
type jsonDiff struct {
	old, new   *loader
	memo       map[[2]string][]Change
	inProgress map[[2]string]bool
	steps      int // comparisons left; below 0: gave up
}

// diffCtx collects the changes of one comparison.
type diffCtx struct{ changes []Change }

func (c *diffCtx) add(ptr, rule string, old, new any) {
	ch := Change{Pointer: ptr, Rule: rule, BreaksBackward: !compatibleRules[rule], Hint: ruleHints[rule]}
	if old != absent {
		ch.Old = compact(old)
	}
	if new != absent {
		ch.New = compact(new)
	}
	c.changes = append(c.changes, ch)
}

// compatible reports whether no change collected so far breaks.
func (c *diffCtx) compatible() bool {
	for _, ch := range c.changes {
		if ch.BreaksBackward {
			return false
		}
	}
	return true
}

func (c *diffCtx) addAll(cs []Change) { c.changes = append(c.changes, cs...) }

// compare compares original with update at ptr.
func (d *jsonDiff) compare(c *diffCtx, ptr string, o, n *node) {
	if d.steps--; d.steps < 0 {
		return
	}
	switch {
	case o == nil && n == nil:
		return
	case o == nil:
		c.add(ptr, "SCHEMA_ADDED", absent, n.raw)
		return
	case n == nil:
		c.add(ptr, "SCHEMA_REMOVED", o.raw, absent)
		return
	}
	key := [2]string{o.loc, n.loc}
	if cached, ok := d.memo[key]; ok {
		// Each reuse copies its changes, so it costs as many steps: a change
		// reached along 2^n paths is reported 2^n times, or the diff gives up.
		if d.steps -= len(cached); d.steps < 0 {
			return
		}
		c.addAll(rebase(ptr, cached))
		return
	}
	if d.inProgress[key] {
		return
	}
	d.inProgress[key] = true
	var sub diffCtx
	d.compareTypes(&sub, o, n)
	delete(d.inProgress, key)
	d.memo[key] = sub.changes
	c.addAll(rebase(ptr, sub.changes))
}

func rebase(ptr string, cs []Change) []Change {
	out := make([]Change, len(cs))
	for i, ch := range cs {
		ch.Pointer = ptr + ch.Pointer
		out[i] = ch
	}
	return out
}

// try compares o with n on the side, for the rules that ask whether one
// schema could stand for another.
func (d *jsonDiff) try(o, n *node) *diffCtx {
	var sub diffCtx
	d.compare(&sub, "", o, n)
	return &sub
}

func (d *jsonDiff) compareTypes(c *diffCtx, o, n *node) {
	switch {
	case o.kind != kindCombined && n.kind == kindCombined:
		if len(n.subs) == 1 {
			if sub := d.try(o, n.subs[0]); sub.compatible() {
				c.addAll(sub.changes)
				return
			}
		} else if n.criterion == anyOf || n.criterion == oneOf {
			for _, s := range n.subs {
				if sub := d.try(o, s); sub.compatible() {
					c.addAll(sub.changes)
					c.add("", "SUM_TYPE_EXTENDED", o.raw, n.raw)
					return
				}
			}
		}
	case o.kind == kindCombined && n.kind != kindCombined:
		if len(o.subs) == 1 {
			if sub := d.try(o.subs[0], n); sub.compatible() {
				c.addAll(sub.changes)
				return
			}
		} else if o.criterion == allOf {
			for _, s := range o.subs {
				if sub := d.try(s, n); sub.compatible() {
					c.addAll(sub.changes)
					c.add("", "PRODUCT_TYPE_NARROWED", o.raw, n.raw)
					return
				}
			}
		}
	}
	if !sameKind(o, n) {
		if o.kind == kindFalse || n.isEmptyKind() {
			return // nothing to read, or anything readable
		}
		c.add("", "TYPE_CHANGED", kindValue(o), kindValue(n))
		return
	}
	if o.annotated && n.annotated {
		for _, a := range []struct{ key, rule string }{
			{"$id", "ID_CHANGED"}, {"title", "TITLE_CHANGED"}, {"description", "DESCRIPTION_CHANGED"}, {"default", "DEFAULT_CHANGED"},
		} {
			ov, nv := get(o.raw, a.key), get(n.raw, a.key)
			if compactOr(ov) != compactOr(nv) {
				c.add("/"+a.key, a.rule, ov, nv)
			}
		}
	}
	switch o.kind {
	case kindString, kindNumber, kindObject, kindArray:
		// Stricter than Confluent, which does not compare these: without
		// "type", a schema of string keywords accepts any non-string too.
		switch {
		case !o.typed && n.typed:
			c.add("/type", "TYPE_NARROWED", absent, n.raw["type"])
		case o.typed && !n.typed:
			c.add("/type", "TYPE_EXTENDED", o.raw["type"], absent)
		}
	}
	switch o.kind {
	case kindString:
		d.strings(c, o, n)
	case kindNumber:
		d.numbers(c, o, n)
	case kindConst:
		if compact(o.raw["const"]) != compact(n.raw["const"]) {
			c.add("/const", "ENUM_ARRAY_CHANGED", o.raw["const"], n.raw["const"])
		}
	case kindEnum:
		d.enums(c, o, n)
	case kindCombined:
		d.combined(c, o, n)
	case kindNot:
		sub := d.try(n.not, o.not) // not inverts: the old negation must cover the new one
		if sub.compatible() {
			c.add("/not", "NOT_TYPE_NARROWED", o.raw["not"], n.raw["not"])
		} else {
			c.add("/not", "NOT_TYPE_EXTENDED", o.raw["not"], n.raw["not"])
		}
	case kindObject:
		d.objects(c, o, n)
	case kindArray:
		d.arrays(c, o, n)
	case kindConditional:
		if compact(o.raw) != compact(n.raw) {
			c.add("/if", "KEYWORD_CHANGED", o.raw, n.raw)
		}
	}
	if o.annotated && n.annotated {
		d.opaque(c, o.raw, n.raw)
	}
}

// sameKind is Confluent's "same schema class": true and {} differ (both
// accept anything, which compareTypes allows for separately), and any two
// combinations are alike.
func sameKind(o, n *node) bool { return o.kind == n.kind }

func kindValue(n *node) any {
	if n.raw == nil {
		return n.kind == kindTrue
	}
	return n.raw
}

// absent marks a keyword missing from one side.
var absent any = struct{ absent bool }{true}

func get(m map[string]any, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return absent
}

func compactOr(v any) string {
	if v == absent {
		return "\x00absent"
	}
	return compact(v)
}

// isAnnotation reports whether a keyword only describes: the standard
// annotations, and vendor extensions ("x-…", e.g. contractgen's
// "x-go-type"), which validators ignore as Confluent's checker does.
func isAnnotation(k string) bool { return annotation[k] || strings.HasPrefix(k, "x-") }

var annotation = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true, "$anchor": true,
}

func number(v any) (*big.Rat, bool) {
	if v == absent {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(compact(v))
	return r, ok
}

// limit compares one numeric keyword; largerLoosens says which way
// relaxes it (only for the rule name: the verdict is the rule's).
func limit(c *diffCtx, o, n map[string]any, key, name string) {
	ov, nv := get(o, key), get(n, key)
	x, okx := number(ov)
	y, oky := number(nv)
	switch {
	case !okx && !oky:
	case !okx:
		c.add("/"+key, name+"_ADDED", ov, nv)
	case !oky:
		c.add("/"+key, name+"_REMOVED", ov, nv)
	case y.Cmp(x) > 0:
		c.add("/"+key, name+"_INCREASED", ov, nv)
	case y.Cmp(x) < 0:
		c.add("/"+key, name+"_DECREASED", ov, nv)
	}
}

func (d *jsonDiff) strings(c *diffCtx, o, n *node) {
	limit(c, o.raw, n.raw, "maxLength", "MAX_LENGTH")
	limit(c, o.raw, n.raw, "minLength", "MIN_LENGTH")
	ov, nv := get(o.raw, "pattern"), get(n.raw, "pattern")
	switch {
	case compactOr(ov) == compactOr(nv):
	case ov == absent:
		c.add("/pattern", "PATTERN_ADDED", ov, nv)
	case nv == absent:
		c.add("/pattern", "PATTERN_REMOVED", ov, nv)
	default:
		c.add("/pattern", "PATTERN_CHANGED", ov, nv)
	}
}

func (d *jsonDiff) numbers(c *diffCtx, o, n *node) {
	limit(c, o.raw, n.raw, "maximum", "MAXIMUM")
	limit(c, o.raw, n.raw, "minimum", "MINIMUM")
	limit(c, o.raw, n.raw, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM")
	limit(c, o.raw, n.raw, "exclusiveMinimum", "EXCLUSIVE_MINIMUM")
	ov, nv := get(o.raw, "multipleOf"), get(n.raw, "multipleOf")
	x, okx := number(ov)
	y, oky := number(nv)
	switch {
	case !okx && !oky:
	case !okx:
		c.add("/multipleOf", "MULTIPLE_OF_ADDED", ov, nv)
	case !oky:
		c.add("/multipleOf", "MULTIPLE_OF_REMOVED", ov, nv)
	case x.Cmp(y) == 0:
	case x.Sign() != 0 && new(big.Rat).Quo(y, x).IsInt():
		c.add("/multipleOf", "MULTIPLE_OF_EXPANDED", ov, nv)
	case y.Sign() != 0 && new(big.Rat).Quo(x, y).IsInt():
		c.add("/multipleOf", "MULTIPLE_OF_REDUCED", ov, nv)
	default:
		c.add("/multipleOf", "MULTIPLE_OF_CHANGED", ov, nv)
	}
	switch {
	case o.integer && !n.integer:
		c.add("", "TYPE_EXTENDED", o.raw["type"], n.raw["type"])
	case !o.integer && n.integer:
		c.add("", "TYPE_NARROWED", get(o.raw, "type"), n.raw["type"])
	}
}

func (d *jsonDiff) enums(c *diffCtx, o, n *node) {
	oe, ne := enumValues(o.raw["enum"]), enumValues(n.raw["enum"])
	added, removed := setDiff(ne, oe), setDiff(oe, ne)
	switch {
	case len(added) == 0 && len(removed) == 0:
	case len(removed) == 0:
		c.add("/enum", "ENUM_ARRAY_EXTENDED", o.raw["enum"], n.raw["enum"])
	case len(added) == 0:
		c.add("/enum", "ENUM_ARRAY_NARROWED", o.raw["enum"], n.raw["enum"])
	default:
		c.add("/enum", "ENUM_ARRAY_CHANGED", o.raw["enum"], n.raw["enum"])
	}
}

func enumValues(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, len(arr))
	for i, x := range arr {
		out[i] = compact(x)
	}
	return out
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

// combined compares two combinations: the criterion, the number of
// distinct branches, then a maximum matching of old branches to new ones
// they are compatible with. A matching that leaves a branch of the
// smaller side unpaired is COMBINED_TYPE_SUBSCHEMAS_CHANGED.
func (d *jsonDiff) combined(c *diffCtx, o, n *node) {
	if o.criterion != n.criterion {
		extended := n.criterion == anyOf ||
			(len(o.subs) == 1 && len(n.subs) == 1) ||
			(len(o.subs) == 1 && n.criterion == oneOf) ||
			(len(n.subs) == 1 && o.criterion == allOf)
		if !extended {
			c.add("", "COMBINED_TYPE_CHANGED", o.criterion, n.criterion)
			return
		}
		c.add("", "COMBINED_TYPE_EXTENDED", o.criterion, n.criterion)
	}
	os, ns := distinct(o.subs), distinct(n.subs)
	switch {
	case len(os) < len(ns) && n.criterion == allOf:
		c.add("", "PRODUCT_TYPE_EXTENDED", len(os), len(ns))
	case len(os) < len(ns):
		c.add("", "SUM_TYPE_EXTENDED", len(os), len(ns))
	case len(os) > len(ns) && o.criterion != allOf:
		c.add("", "SUM_TYPE_NARROWED", len(os), len(ns))
	case len(os) > len(ns):
		c.add("", "PRODUCT_TYPE_NARROWED", len(os), len(ns))
	}
	edges := make([][][]Change, len(os)) // edges[i][j]: changes of a compatible pair, nil when not
	ok := make([][]bool, len(os))
	for i, a := range os {
		edges[i] = make([][]Change, len(ns))
		ok[i] = make([]bool, len(ns))
		for j, b := range ns {
			var sub diffCtx
			d.compare(&sub, "/"+o.criterion+"/"+itoa(i), a, b)
			if sub.compatible() {
				edges[i][j], ok[i][j] = sub.changes, true
			}
		}
	}
	match := maxMatching(ok, len(ns))
	matched := 0
	for i, j := range match {
		if j >= 0 {
			matched++
			c.addAll(edges[i][j])
		}
	}
	if matched < min(len(os), len(ns)) {
		c.add("", "COMBINED_TYPE_SUBSCHEMAS_CHANGED", o.raw, n.raw)
	}
}

// distinct drops repeated branches, keeping the first of each.
func distinct(subs []*node) []*node {
	var out []*node
	seen := map[string]bool{}
	for _, s := range subs {
		k := s.canonical()
		if !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	return out
}

// maxMatching pairs rows with columns along ok edges, as many as possible
// (augmenting paths); it returns each row's column, -1 when unpaired.
func maxMatching(ok [][]bool, cols int) []int {
	rowOf := make([]int, cols)
	for j := range rowOf {
		rowOf[j] = -1
	}
	var augment func(i int, seen []bool) bool
	augment = func(i int, seen []bool) bool {
		for j := 0; j < cols; j++ {
			if !ok[i][j] || seen[j] {
				continue
			}
			seen[j] = true
			if rowOf[j] < 0 || augment(rowOf[j], seen) {
				rowOf[j] = i
				return true
			}
		}
		return false
	}
	for i := range ok {
		augment(i, make([]bool, cols))
	}
	colOf := make([]int, len(ok))
	for i := range colOf {
		colOf[i] = -1
	}
	for j, i := range rowOf {
		if i >= 0 {
			colOf[i] = j
		}
	}
	return colOf
}

// Content models, for objects and arrays alike: open (anything may follow),
// partially open (what follows must match a schema) or closed.

func objectOpen(n *node) bool {
	return !n.addlFalse && n.addl == nil && len(n.patternProps) == 0 && (n.uneval == nil || n.uneval.isEmptyKind())
}

// objectPartial returns the schema that covers a property the object does
// not name, or nil when the object is closed to it.
func objectPartial(n *node, name string) *node {
	for _, pp := range n.patternProps {
		if re, err := regexp.Compile(pp.pattern); err == nil && re.MatchString(name) {
			return pp.schema
		}
	}
	if n.addl != nil {
		return n.addl
	}
	if !n.addlFalse && n.uneval != nil && n.uneval.kind != kindFalse && !n.uneval.isEmptyKind() {
		return n.uneval
	}
	return nil
}

func (d *jsonDiff) objects(c *diffCtx, o, n *node) {
	oreq, nreq := stringSet(get(o.raw, "required")), stringSet(get(n.raw, "required"))
	for _, name := range sortedNodeKeys(o.props) {
		if _, ok := n.props[name]; !ok {
			continue
		}
		or, nr := slices.Contains(oreq, name), slices.Contains(nreq, name)
		p := "/required/" + escape(name)
		switch {
		case or && !nr:
			c.add(p, "REQUIRED_ATTRIBUTE_REMOVED", name, absent)
		case !or && nr && hasDefault(n.props[name]):
			c.add(p, "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", absent, name)
		case !or && nr:
			c.add(p, "REQUIRED_ATTRIBUTE_ADDED", absent, name)
		}
	}
	// Stricter than Confluent, which reads required only for properties
	// both sides declare: a name required without a schema is still a
	// promise that data carries it.
	for _, name := range sortedStrings(oreq, nreq) {
		if o.props[name] != nil || n.props[name] != nil {
			continue
		}
		p := "/required/" + escape(name)
		switch or, nr := slices.Contains(oreq, name), slices.Contains(nreq, name); {
		case or && !nr:
			c.add(p, "REQUIRED_ATTRIBUTE_REMOVED", name, absent)
		case !or && nr:
			c.add(p, "REQUIRED_ATTRIBUTE_ADDED", absent, name)
		}
	}
	for _, name := range sortedNodeKeys(o.props, n.props) {
		p := "/properties/" + escape(name)
		os, ns := o.props[name], n.props[name]
		switch {
		case os != nil && ns != nil:
			d.compare(c, p, os, ns)
		case ns == nil:
			d.propertyRemoved(c, p, name, os, n)
		default:
			d.propertyAdded(c, p, name, ns, o, nreq)
		}
	}
	for _, name := range sortedKeysOf(o.propDeps, n.propDeps) {
		p := "/dependencies/" + escape(name)
		od, inOld := o.propDeps[name]
		nd, inNew := n.propDeps[name]
		switch {
		case !inNew:
			c.add(p, "DEPENDENCY_ARRAY_REMOVED", od, absent)
		case !inOld:
			c.add(p, "DEPENDENCY_ARRAY_ADDED", absent, nd)
		case len(setDiff(od, nd)) == 0 && len(setDiff(nd, od)) == 0:
		case len(setDiff(od, nd)) == 0:
			c.add(p, "DEPENDENCY_ARRAY_EXTENDED", od, nd)
		case len(setDiff(nd, od)) == 0:
			c.add(p, "DEPENDENCY_ARRAY_NARROWED", od, nd)
		default:
			c.add(p, "DEPENDENCY_ARRAY_CHANGED", od, nd)
		}
	}
	for _, name := range sortedNodeKeys(o.schemaDeps, n.schemaDeps) {
		p := "/dependencies/" + escape(name)
		os, ns := o.schemaDeps[name], n.schemaDeps[name]
		switch {
		case ns == nil:
			c.add(p, "DEPENDENCY_SCHEMA_REMOVED", os.raw, absent)
		case os == nil:
			c.add(p, "DEPENDENCY_SCHEMA_ADDED", absent, ns.raw)
		default:
			d.compare(c, p, os, ns)
		}
	}
	// additionalProperties: whether it lets anything through, then its schema.
	oap, nap := get(o.raw, "additionalProperties"), get(n.raw, "additionalProperties")
	switch {
	case o.addlFalse != n.addlFalse && !n.addlFalse:
		c.add("/additionalProperties", "ADDITIONAL_PROPERTIES_ADDED", oap, nap)
	case o.addlFalse != n.addlFalse:
		c.add("/additionalProperties", "ADDITIONAL_PROPERTIES_REMOVED", oap, nap)
	case o.addl == nil && n.addl != nil:
		c.add("/additionalProperties", "ADDITIONAL_PROPERTIES_NARROWED", oap, nap)
	case o.addl != nil && n.addl == nil:
		c.add("/additionalProperties", "ADDITIONAL_PROPERTIES_EXTENDED", oap, nap)
	case o.addl != nil:
		d.compare(c, "/additionalProperties", o.addl, n.addl)
	}
	unevaluated(d, c, "/unevaluatedProperties", "UNEVALUATED_PROPERTIES", o.uneval, n.uneval)
	limit(c, o.raw, n.raw, "maxProperties", "MAX_PROPERTIES")
	limit(c, o.raw, n.raw, "minProperties", "MIN_PROPERTIES")
	// Confluent reads patternProperties only as a content model for added
	// and removed properties; the schema of a pattern both sides keep is
	// compared here too.
	for _, op := range o.patternProps {
		for _, np := range n.patternProps {
			if op.pattern == np.pattern {
				d.compare(c, "/patternProperties/"+escape(op.pattern), op.schema, np.schema)
			}
		}
	}
}

// unevaluated compares unevaluatedProperties or unevaluatedItems: false
// closes, true or {} opens, a schema opens partly.
func unevaluated(d *jsonDiff, c *diffCtx, p, name string, o, n *node) {
	switch {
	case o == nil && n == nil:
	case o == nil && n.kind == kindFalse:
		c.add(p, name+"_REMOVED", absent, false)
	case o == nil:
		c.add(p, name+"_NARROWED", absent, n.raw)
	case n == nil && o.kind == kindFalse:
		c.add(p, name+"_ADDED", false, absent)
	case n == nil:
		c.add(p, name+"_EXTENDED", o.raw, absent)
	case o.kind == kindFalse && n.kind != kindFalse:
		c.add(p, name+"_ADDED", false, kindValue(n))
	case o.kind != kindFalse && n.kind == kindFalse:
		c.add(p, name+"_REMOVED", kindValue(o), false)
	case o.isEmptyKind() && !n.isEmptyKind():
		c.add(p, name+"_NARROWED", kindValue(o), kindValue(n))
	case !o.isEmptyKind() && n.isEmptyKind():
		c.add(p, name+"_EXTENDED", kindValue(o), kindValue(n))
	default:
		d.compare(c, p, o, n)
	}
}

func hasDefault(n *node) bool { return n.raw != nil && get(n.raw, "default") != absent }

// propertyAdded judges a property only the update names, by the content
// model of the original: the data it accepted may already carry it.
func (d *jsonDiff) propertyAdded(c *diffCtx, p, name string, ns *node, o *node, nreq []string) {
	required := slices.Contains(nreq, name)
	if objectOpen(o) {
		switch {
		case ns.isEmptyKind():
			c.add(p, "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", absent, kindValue(ns))
		case required && hasDefault(ns):
			c.add(p, "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL", absent, kindValue(ns))
		case required:
			c.add(p, "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", absent, kindValue(ns))
		default:
			c.add(p, "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", absent, kindValue(ns))
		}
		return
	}
	if cover := objectPartial(o, name); cover != nil {
		sub := d.try(cover, ns)
		c.addAll(rebase(p, sub.changes))
		if sub.compatible() {
			c.add(p, "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", absent, kindValue(ns))
		} else {
			c.add(p, "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", absent, kindValue(ns))
		}
	}
	switch {
	case required && hasDefault(ns):
		c.add(p, "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", absent, kindValue(ns))
	case required:
		c.add(p, "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", absent, kindValue(ns))
	default:
		c.add(p, "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", absent, kindValue(ns))
	}
}

// propertyRemoved judges a property only the original names, by the
// content model of the update, which must still accept it.
func (d *jsonDiff) propertyRemoved(c *diffCtx, p, name string, os *node, n *node) {
	if objectOpen(n) {
		c.add(p, "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", kindValue(os), absent)
		return
	}
	if cover := objectPartial(n, name); cover != nil {
		sub := d.try(os, cover)
		c.addAll(rebase(p, sub.changes))
		if sub.compatible() {
			c.add(p, "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", kindValue(os), absent)
		} else {
			c.add(p, "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", kindValue(os), absent)
		}
		return
	}
	if os.kind == kindFalse {
		c.add(p, "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", false, absent)
		return
	}
	c.add(p, "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", kindValue(os), absent)
}

func arrayOpen(n *node) bool {
	return !n.addItemsFalse && n.addItems == nil && (n.unevalItems == nil || n.unevalItems.isEmptyKind())
}

// arrayPartial returns the schema items past the tuple must match, nil
// when the array is open or closed past it.
func arrayPartial(n *node) *node {
	if n.addItems != nil {
		return n.addItems
	}
	if !n.addItemsFalse && n.unevalItems != nil && n.unevalItems.kind != kindFalse && !n.unevalItems.isEmptyKind() {
		return n.unevalItems
	}
	return nil
}

func (d *jsonDiff) arrays(c *diffCtx, o, n *node) {
	d.compare(c, "/items", o.allItems, n.allItems)
	common := min(len(o.tuple), len(n.tuple))
	for i := 0; i < common; i++ {
		d.compare(c, "/"+n.tupleKeyword+"/"+itoa(i), o.tuple[i], n.tuple[i])
	}
	for i := common; i < len(o.tuple); i++ {
		p := "/" + o.tupleKeyword + "/" + itoa(i)
		os := o.tuple[i]
		switch cover := arrayPartial(n); {
		case arrayOpen(n):
			c.add(p, "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", kindValue(os), absent)
		case cover != nil:
			sub := d.try(os, cover)
			c.addAll(rebase(p, sub.changes))
			if sub.compatible() {
				c.add(p, "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", kindValue(os), absent)
			} else {
				c.add(p, "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", kindValue(os), absent)
			}
		case os.kind == kindFalse:
			c.add(p, "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", false, absent)
		default:
			c.add(p, "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", kindValue(os), absent)
		}
	}
	for i := common; i < len(n.tuple); i++ {
		p := "/" + n.tupleKeyword + "/" + itoa(i)
		ns := n.tuple[i]
		switch cover := arrayPartial(o); {
		case arrayOpen(o) && ns.isEmptyKind():
			c.add(p, "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", absent, kindValue(ns))
		case arrayOpen(o):
			c.add(p, "ITEM_ADDED_TO_OPEN_CONTENT_MODEL", absent, kindValue(ns))
		case cover != nil:
			sub := d.try(cover, ns)
			c.addAll(rebase(p, sub.changes))
			if sub.compatible() {
				c.add(p, "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", absent, kindValue(ns))
			} else {
				c.add(p, "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", absent, kindValue(ns))
			}
		default:
			c.add(p, "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", absent, kindValue(ns))
		}
	}
	ap := "/" + n.addItemsKeywrd
	oa, na := additionalItemsValue(o), additionalItemsValue(n)
	switch {
	case o.addItemsFalse != n.addItemsFalse && o.addItemsFalse:
		c.add(ap, "ADDITIONAL_ITEMS_ADDED", oa, na)
	case o.addItemsFalse != n.addItemsFalse:
		c.add(ap, "ADDITIONAL_ITEMS_REMOVED", oa, na)
	case o.addItems == nil && n.addItems != nil:
		c.add(ap, "ADDITIONAL_ITEMS_NARROWED", oa, na)
	case o.addItems != nil && n.addItems == nil:
		c.add(ap, "ADDITIONAL_ITEMS_EXTENDED", oa, na)
	case o.addItems != nil:
		d.compare(c, ap, o.addItems, n.addItems)
	}
	unevaluated(d, c, "/unevaluatedItems", "UNEVALUATED_ITEMS", o.unevalItems, n.unevalItems)
	limit(c, o.raw, n.raw, "maxItems", "MAX_ITEMS")
	limit(c, o.raw, n.raw, "minItems", "MIN_ITEMS")
	switch {
	case o.uniqueItems && !n.uniqueItems:
		c.add("/uniqueItems", "UNIQUE_ITEMS_REMOVED", true, get(n.raw, "uniqueItems"))
	case !o.uniqueItems && n.uniqueItems:
		c.add("/uniqueItems", "UNIQUE_ITEMS_ADDED", get(o.raw, "uniqueItems"), true)
	}
	limit(c, o.raw, n.raw, "maxContains", "MAX_CONTAINS")
	limit(c, o.raw, n.raw, "minContains", "MIN_CONTAINS")
}

func additionalItemsValue(n *node) any {
	switch {
	case n.addItemsFalse:
		return false
	case n.addItems != nil:
		return n.addItems.raw
	}
	return absent
}

// modelled lists the keywords the rules above read; opaque compares any
// other non-annotation keyword as a whole.
var modelled = map[string]bool{
	"type": true, "enum": true, "const": true, "not": true, "allOf": true, "anyOf": true, "oneOf": true, "$ref": true,
	"if": true, "then": true, "else": true,
	"properties": true, "required": true, "additionalProperties": true, "patternProperties": true,
	"dependencies": true, "dependentRequired": true, "dependentSchemas": true, "unevaluatedProperties": true,
	"minProperties": true, "maxProperties": true,
	"items": true, "prefixItems": true, "additionalItems": true, "unevaluatedItems": true,
	"minItems": true, "maxItems": true, "uniqueItems": true, "minContains": true, "maxContains": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
	"minLength": true, "maxLength": true, "pattern": true,
}

// opaque reports a change to any keyword Confluent's checker does not
// read (contains, propertyNames, contentEncoding, …) as KEYWORD_CHANGED.
func (d *jsonDiff) opaque(c *diffCtx, o, n map[string]any) {
	for _, k := range sortedKeys(o, n) {
		if isAnnotation(k) || modelled[k] {
			continue
		}
		if compactOr(get(o, k)) != compactOr(get(n, k)) {
			c.add("/"+escape(k), "KEYWORD_CHANGED", get(o, k), get(n, k))
		}
	}
}

func sortedNodeKeys(ms ...map[string]*node) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

func sortedKeysOf(ms ...map[string][]string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	slices.Sort(out)
	return out
}

func sortedStrings(xs ...[]string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
