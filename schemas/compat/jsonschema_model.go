package compat

import (
	"strings"
)

// kind is the shape a JSON Schema (sub)schema takes once loaded, as
// Confluent Schema Registry's checker sees it (through the everit schema
// model): a schema is one of these, and a schema mixing keywords of
// several kinds ({"type":"string","enum":[…]}) is an allOf of one part per
// kind. Two schemas of different kinds at the same place are a
// TYPE_CHANGED, whatever their keywords.
type kind int

const (
	kindEmpty       kind = iota // {} or only annotations: accepts anything
	kindTrue                    // true: accepts anything
	kindFalse                   // false: accepts nothing
	kindString                  // string keywords, or "type":"string"
	kindNumber                  // number keywords, or "type":"number"/"integer"
	kindBoolean                 // "type":"boolean"
	kindNull                    // "type":"null"
	kindObject                  // object keywords, or "type":"object"
	kindArray                   // array keywords, or "type":"array"
	kindEnum                    // enum
	kindConst                   // const
	kindNot                     // not
	kindCombined                // allOf, anyOf or oneOf (or several kinds at once)
	kindConditional             // if/then/else, compared as a whole
)

// Combination criteria.
const (
	allOf = "allOf"
	anyOf = "anyOf"
	oneOf = "oneOf"
)

// node is one loaded subschema. raw is the keyword map it was read from
// (nil for true/false); loc names it uniquely within its document, so a
// $ref reached twice yields the same node and a pair of nodes can be
// memoised and recognised when a recursive schema meets itself again.
type node struct {
	kind kind
	loc  string
	raw  map[string]any

	integer   bool // kindNumber: "type":"integer"
	annotated bool // a schema of the document, whose title, description… count; not a part of one
	typed     bool // kindString…kindArray: named by "type", not only sniffed from its keywords

	// kindObject
	props        map[string]*node
	patternProps []patternProp
	addlFalse    bool  // additionalProperties: false
	addl         *node // additionalProperties as a schema (an object, even {})
	propDeps     map[string][]string
	schemaDeps   map[string]*node
	uneval       *node // unevaluatedProperties

	// kindArray
	allItems       *node   // items as one schema for every item
	tuple          []*node // prefixItems, or items as an array (draft 7)
	addItemsFalse  bool    // additionalItems: false, or items: false after prefixItems
	addItems       *node   // additionalItems (or items after prefixItems) as a schema
	unevalItems    *node
	uniqueItems    bool
	tupleKeyword   string // "prefixItems" or "items", for pointers
	addItemsKeywrd string // "additionalItems" or "items", for pointers

	// kindCombined
	criterion string
	subs      []*node
	synthetic bool // several kinds in one schema, not a keyword of the document

	// kindNot
	not *node
}

type patternProp struct {
	pattern string
	schema  *node
}

// isEmptyKind reports whether the node accepts anything (Confluent's
// EmptySchema, of which true is a case).
func (n *node) isEmptyKind() bool { return n.kind == kindEmpty || n.kind == kindTrue }

// canonical is a key that is equal for equal subschemas, for collapsing
// duplicate branches of a combination.
func (n *node) canonical() string {
	switch {
	case n.kind == kindTrue:
		return "true"
	case n.kind == kindFalse:
		return "false"
	case n.annotated:
		return compact(n.raw)
	}
	return n.loc
}

// loader turns one document into nodes, once per location.
type loader struct {
	root      any
	cache     map[string]*node
	resolving map[string]bool // $ref chains being followed, to stop a ref to itself
}

func newLoader(root any) *loader {
	return &loader{root: root, cache: map[string]*node{}, resolving: map[string]bool{}}
}

// Keywords that give a schema without "type" a kind, as everit sniffs them.
var (
	objectKeywords = []string{"properties", "required", "minProperties", "maxProperties", "dependencies",
		"dependentRequired", "dependentSchemas", "patternProperties", "additionalProperties", "unevaluatedProperties"}
	arrayKeywords = []string{"items", "prefixItems", "additionalItems", "unevaluatedItems", "minItems",
		"maxItems", "uniqueItems", "minContains", "maxContains"}
	numberKeywords = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
	stringKeywords = []string{"minLength", "maxLength", "pattern", "format"}
)

func hasAny(m map[string]any, keys []string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// load returns the node of value v found at loc.
func (l *loader) load(v any, loc string) *node {
	if n, ok := l.cache[loc]; ok {
		return n
	}
	m, isMap := v.(map[string]any)
	if isMap {
		if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#") && onlyAnnotationsBeside(m) {
			if l.resolving[loc] {
				return &node{kind: kindEmpty, loc: loc}
			}
			l.resolving[loc] = true
			target, ok := l.pointer(strings.TrimPrefix(ref, "#"))
			var n *node
			if ok {
				n = l.load(target, "#"+strings.TrimPrefix(ref, "#"))
			} else {
				n = &node{kind: kindEmpty, loc: loc}
			}
			delete(l.resolving, loc)
			l.cache[loc] = n
			return n
		}
	}
	n := &node{loc: loc}
	l.cache[loc] = n // before the children: a recursive reference finds it
	switch x := v.(type) {
	case bool:
		n.kind = kindFalse
		if x {
			n.kind = kindTrue
		}
		return n
	case map[string]any:
		*n = *l.build(l.mergeRef(x), loc)
		return n
	}
	n.kind = kindEmpty
	return n
}

// mergeRef folds the target of a local $ref into the keywords beside it
// when no keyword appears in both, so a limit changed beside a reference
// is reported as that limit; otherwise the reference stays one more part
// of the schema (an allOf, as 2020-12 reads it).
func (l *loader) mergeRef(m map[string]any) map[string]any {
	ref, ok := m["$ref"].(string)
	if !ok || !strings.HasPrefix(ref, "#") || l.resolving[ref] {
		return m
	}
	target, ok := l.pointer(strings.TrimPrefix(ref, "#"))
	tm, isMap := target.(map[string]any)
	if !ok || !isMap {
		return m
	}
	if _, nested := tm["$ref"]; nested {
		return m
	}
	merged := map[string]any{}
	for k, v := range tm {
		if !isAnnotation(k) {
			merged[k] = v
		}
	}
	for k, v := range m {
		if k == "$ref" {
			continue
		}
		if _, clash := merged[k]; clash {
			return m
		}
		merged[k] = v
	}
	return merged
}

// onlyAnnotationsBeside reports whether $ref stands alone in its schema
// (annotations aside); with other keywords beside it, the reference is
// one more part of the schema.
func onlyAnnotationsBeside(m map[string]any) bool {
	for k := range m {
		if k != "$ref" && !isAnnotation(k) {
			return false
		}
	}
	return true
}

// pointer resolves a JSON pointer in the document.
func (l *loader) pointer(p string) (any, bool) {
	cur := l.root
	if p == "" {
		return cur, true
	}
	for _, tok := range strings.Split(p, "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// build loads a keyword map: one part per kind of keyword present, an
// allOf of the parts when there are several.
func (l *loader) build(m map[string]any, loc string) *node {
	// Parts in the order Confluent's loader builds them, which its
	// pointers (allOf/1/enum beside a type) follow.
	parts := l.typed(m, loc)
	if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
		if target, ok := l.pointer(strings.TrimPrefix(ref, "#")); ok {
			parts = append(parts, l.load(target, ref))
		}
	}
	if _, ok := m["enum"]; ok {
		parts = append(parts, &node{kind: kindEnum, loc: loc + "/enum", raw: m})
	}
	for _, c := range []string{allOf, anyOf, oneOf} {
		arr, ok := m[c].([]any)
		if !ok {
			continue
		}
		cn := &node{kind: kindCombined, loc: loc + "/" + c, raw: map[string]any{c: arr}, criterion: c}
		for i, s := range arr {
			cn.subs = append(cn.subs, l.load(s, loc+"/"+c+"/"+itoa(i)))
		}
		parts = append(parts, cn)
	}
	if s, ok := m["not"]; ok {
		parts = append(parts, &node{kind: kindNot, loc: loc + "/not", raw: m, not: l.load(s, loc+"/not")})
	}
	if _, ok := m["const"]; ok {
		parts = append(parts, &node{kind: kindConst, loc: loc + "/const", raw: m})
	}
	if _, ok := m["if"]; ok {
		parts = append(parts, &node{kind: kindConditional, loc: loc + "/if", raw: map[string]any{"if": m["if"], "then": m["then"], "else": m["else"]}})
	}
	var n *node
	switch len(parts) {
	case 0:
		n = &node{kind: kindEmpty, loc: loc, raw: m}
	case 1:
		n = parts[0]
	default:
		n = &node{kind: kindCombined, loc: loc, raw: m, criterion: allOf, subs: parts, synthetic: true}
	}
	cp := *n
	cp.loc, cp.raw, cp.annotated = loc, m, true
	return &cp
}

// typed loads the type-specific parts: the types "type" names (an anyOf
// when it names several), or without "type", each kind whose keywords
// appear.
func (l *loader) typed(m map[string]any, loc string) []*node {
	var types []string
	switch t := m["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	}
	if _, ok := m["type"]; ok {
		if len(types) == 1 {
			n := l.ofType(m, loc, types[0])
			n.typed = true
			return []*node{n}
		}
		union := &node{kind: kindCombined, loc: loc + "/type", raw: m, criterion: anyOf, synthetic: true}
		for _, t := range types {
			n := l.ofType(m, loc+"/type="+t, t)
			n.typed = true
			union.subs = append(union.subs, n)
		}
		return []*node{union}
	}
	var out []*node
	if hasAny(m, objectKeywords) {
		out = append(out, l.ofType(m, loc, "object"))
	}
	if hasAny(m, arrayKeywords) {
		out = append(out, l.ofType(m, loc, "array"))
	}
	if hasAny(m, numberKeywords) {
		out = append(out, l.ofType(m, loc, "number"))
	}
	if hasAny(m, stringKeywords) {
		out = append(out, l.ofType(m, loc, "string"))
	}
	return out
}

func (l *loader) ofType(m map[string]any, loc, t string) *node {
	n := &node{loc: loc + "#" + t, raw: m}
	switch t {
	case "string":
		n.kind = kindString
	case "integer":
		n.kind, n.integer = kindNumber, true
	case "number":
		n.kind = kindNumber
	case "boolean":
		n.kind = kindBoolean
	case "null":
		n.kind = kindNull
	case "object":
		n.kind = kindObject
		l.object(n, m, loc)
	case "array":
		n.kind = kindArray
		l.array(n, m, loc)
	default:
		n.kind = kindEmpty
	}
	return n
}

func (l *loader) object(n *node, m map[string]any, loc string) {
	n.props = map[string]*node{}
	if props, ok := m["properties"].(map[string]any); ok {
		for k, v := range props {
			n.props[k] = l.load(v, loc+"/properties/"+escape(k))
		}
	}
	if pp, ok := m["patternProperties"].(map[string]any); ok {
		for _, k := range sortedKeys(pp) {
			n.patternProps = append(n.patternProps, patternProp{k, l.load(pp[k], loc+"/patternProperties/"+escape(k))})
		}
	}
	switch ap := m["additionalProperties"].(type) {
	case bool:
		n.addlFalse = !ap
	case map[string]any:
		n.addl = l.load(ap, loc+"/additionalProperties")
	}
	n.propDeps = map[string][]string{}
	n.schemaDeps = map[string]*node{}
	for _, kw := range []string{"dependencies", "dependentRequired", "dependentSchemas"} {
		deps, _ := m[kw].(map[string]any)
		for k, v := range deps {
			if arr, ok := v.([]any); ok {
				n.propDeps[k] = stringSet(arr)
			} else {
				n.schemaDeps[k] = l.load(v, loc+"/"+kw+"/"+escape(k))
			}
		}
	}
	if u, ok := m["unevaluatedProperties"]; ok {
		n.uneval = l.load(u, loc+"/unevaluatedProperties")
	}
}

func (l *loader) array(n *node, m map[string]any, loc string) {
	n.tupleKeyword, n.addItemsKeywrd = "items", "additionalItems"
	items, hasItems := m["items"]
	if prefix, ok := m["prefixItems"].([]any); ok {
		// 2020-12: prefixItems is the tuple, items what follows it.
		n.tupleKeyword, n.addItemsKeywrd = "prefixItems", "items"
		for i, s := range prefix {
			n.tuple = append(n.tuple, l.load(s, loc+"/prefixItems/"+itoa(i)))
		}
		l.additionalItems(n, items, hasItems, loc+"/items")
	} else {
		switch x := items.(type) {
		case []any:
			// Draft 7: items as an array is the tuple, additionalItems what follows.
			for i, s := range x {
				n.tuple = append(n.tuple, l.load(s, loc+"/items/"+itoa(i)))
			}
		case bool:
			// items: false allows no item at all: a closed array with an empty tuple.
			n.addItemsKeywrd = "items"
			l.additionalItems(n, x, true, loc+"/items")
		default:
			if hasItems {
				n.allItems = l.load(items, loc+"/items")
			}
		}
		// Confluent reads additionalItems whatever items holds.
		if a, has := m["additionalItems"]; has {
			n.addItemsKeywrd = "additionalItems"
			l.additionalItems(n, a, has, loc+"/additionalItems")
		}
	}
	if u, ok := m["unevaluatedItems"]; ok {
		n.unevalItems = l.load(u, loc+"/unevaluatedItems")
	}
	n.uniqueItems = m["uniqueItems"] == true
}

func (l *loader) additionalItems(n *node, v any, has bool, loc string) {
	if !has {
		return
	}
	switch x := v.(type) {
	case bool:
		n.addItemsFalse = !x
	case map[string]any:
		n.addItems = l.load(x, loc)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
