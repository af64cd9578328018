package compat

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// DiffAvro lists the changes between two Avro schemas under Avro's
// schema-resolution rules. For BACKWARD the old schema is the writer and
// the new one the reader; for FORWARD the roles swap. Rule names follow
// Avro's resolution outcomes (READER_FIELD_MISSING_DEFAULT_VALUE,
// MISSING_ENUM_SYMBOLS, MISSING_UNION_BRANCH, TYPE_MISMATCH, NAME_MISMATCH,
// FIXED_SIZE_MISMATCH) and, for the changes that resolve, what happened
// (FIELD_ADDED, FIELD_REMOVED, TYPE_PROMOTED, ENUM_SYMBOL_ADDED, ...).
func DiffAvro(old, new []byte) ([]Change, error) {
	o, err := parseAvro(old)
	if err != nil {
		return nil, fmt.Errorf("old schema: %w", err)
	}
	n, err := parseAvro(new)
	if err != nil {
		return nil, fmt.Errorf("new schema: %w", err)
	}
	d := &avroDiff{seen: map[[2]*avroType]bool{}}
	d.compare(o, n, "")
	return d.changes, nil
}

// avroType is a parsed Avro schema node. Named types are shared between
// their definition and every reference to them.
type avroType struct {
	kind    string // null boolean int long float double bytes string record enum array map fixed union
	name    string // full name of a named type
	aliases []string
	fields  []avroField
	symbols []string
	def     *string // enum default symbol
	size    int
	items   *avroType // array items, map values
	branch  []*avroType
	raw     any
}

type avroField struct {
	name       string
	aliases    []string
	typ        *avroType
	hasDefault bool
	def        any
}

func parseAvro(b []byte) (*avroType, error) {
	v, err := decode(b)
	if err != nil {
		return nil, err
	}
	p := &avroParser{named: map[string]*avroType{}}
	return p.parse(v, "")
}

type avroParser struct{ named map[string]*avroType }

var avroPrimitives = []string{"null", "boolean", "int", "long", "float", "double", "bytes", "string"}

func fullName(name, ns string) string {
	if strings.Contains(name, ".") || ns == "" {
		return name
	}
	return ns + "." + name
}

func (p *avroParser) parse(v any, ns string) (*avroType, error) {
	switch x := v.(type) {
	case string:
		if slices.Contains(avroPrimitives, x) {
			return &avroType{kind: x, raw: x}, nil
		}
		if t, ok := p.named[fullName(x, ns)]; ok {
			return t, nil
		}
		if t, ok := p.named[x]; ok {
			return t, nil
		}
		return nil, fmt.Errorf("unknown Avro type %q", x)
	case []any:
		u := &avroType{kind: "union", raw: x}
		for _, b := range x {
			t, err := p.parse(b, ns)
			if err != nil {
				return nil, err
			}
			u.branch = append(u.branch, t)
		}
		return u, nil
	case map[string]any:
		kind, _ := x["type"].(string)
		if kind == "" {
			return p.parse(x["type"], ns) // {"type": [...]} or {"type": {...}}
		}
		t := &avroType{kind: kind, raw: x}
		switch kind {
		case "record", "error", "enum", "fixed":
			name, _ := x["name"].(string)
			if name == "" {
				return nil, fmt.Errorf("%s without a name", kind)
			}
			if n, ok := x["namespace"].(string); ok {
				ns = n
			}
			t.name = fullName(name, ns)
			if i := strings.LastIndex(t.name, "."); i >= 0 {
				ns = t.name[:i]
			}
			for _, a := range stringSet(x["aliases"]) {
				t.aliases = append(t.aliases, fullName(a, ns))
			}
			p.named[t.name] = t
		}
		switch kind {
		case "record", "error":
			t.kind = "record"
			fields, _ := x["fields"].([]any)
			names := make(map[string]bool, len(fields))
			for i, f := range fields {
				fm, _ := f.(map[string]any)
				name, _ := fm["name"].(string)
				// Fields are matched by name: a nameless or repeated one
				// has no identity to compare (Avro refuses both).
				if name == "" {
					return nil, fmt.Errorf("record %s: field %d without a name", t.name, i)
				}
				if names[name] {
					return nil, fmt.Errorf("record %s: field %s declared twice", t.name, name)
				}
				names[name] = true
				ft, err := p.parse(fm["type"], ns)
				if err != nil {
					return nil, fmt.Errorf("field %s: %w", name, err)
				}
				def, has := fm["default"]
				t.fields = append(t.fields, avroField{name: name, aliases: stringSet(fm["aliases"]), typ: ft, hasDefault: has, def: def})
			}
		case "enum":
			t.symbols = stringSet(x["symbols"])
			if s, ok := x["default"].(string); ok {
				t.def = &s
			}
		case "fixed":
			if n, ok := x["size"].(json.Number); ok {
				i, _ := n.Int64()
				t.size = int(i)
			}
		case "array", "map":
			key := "items"
			if kind == "map" {
				key = "values"
			}
			it, err := p.parse(x[key], ns)
			if err != nil {
				return nil, err
			}
			t.items = it
		default:
			if !slices.Contains(avroPrimitives, kind) {
				return p.parse(kind, ns) // a named type used with attributes
			}
		}
		return t, nil
	}
	return nil, fmt.Errorf("not an Avro schema: %s", compact(v))
}

type avroDiff struct {
	changes []Change
	seen    map[[2]*avroType]bool
}

func (d *avroDiff) add(ptr, rule, old, new string, bw, fw bool, hint string) {
	d.changes = append(d.changes, Change{Pointer: ptr, Rule: rule, Old: old, New: new, BreaksBackward: bw, BreaksForward: fw, Hint: hint})
}

func (t *avroType) String() string {
	if t.name != "" {
		return t.name
	}
	if t.kind == "union" || t.kind == "array" || t.kind == "map" {
		return compact(t.raw)
	}
	return t.kind
}

// promotes reports whether Avro resolves data written as w when read as r
// by promotion.
func promotes(w, r string) bool {
	switch w {
	case "int":
		return r == "long" || r == "float" || r == "double"
	case "long":
		return r == "float" || r == "double"
	case "float":
		return r == "double"
	case "string":
		return r == "bytes"
	case "bytes":
		return r == "string"
	}
	return false
}

// resolves reports whether data written with w is readable with r.
func resolves(w, r *avroType) bool {
	d := &avroDiff{seen: map[[2]*avroType]bool{}}
	d.compare(w, r, "")
	for _, c := range d.changes {
		if c.BreaksBackward {
			return false
		}
	}
	return true
}

func (d *avroDiff) compare(o, n *avroType, ptr string) {
	key := [2]*avroType{o, n}
	if d.seen[key] {
		return // recursive named types: already compared
	}
	d.seen[key] = true

	if o.kind == "union" || n.kind == "union" {
		d.unions(o, n, ptr)
		return
	}
	if o.kind != n.kind {
		bw, fw := !promotes(o.kind, n.kind), !promotes(n.kind, o.kind)
		rule := "TYPE_PROMOTED"
		hint := "old consumers cannot read the promoted type; fine under BACKWARD"
		if bw {
			rule, hint = "TYPE_MISMATCH", "the types do not resolve; add a new field with the new type"
		}
		if !bw && !fw {
			hint = ""
		}
		d.add(ptr+"/type", rule, o.String(), n.String(), bw, fw, hint)
		return
	}
	switch o.kind {
	case "record", "enum", "fixed":
		if o.name != n.name {
			bw := !slices.Contains(n.aliases, o.name) // the reader's aliases name the writer
			fw := !slices.Contains(o.aliases, n.name)
			rule := "NAME_MISMATCH"
			if !bw {
				rule = "NAME_CHANGED_WITH_ALIAS"
			}
			d.add(ptr+"/name", rule, o.name, n.name, bw, fw, "a reader finds a renamed type only through its aliases; add the old name to \"aliases\"")
		}
	}
	switch o.kind {
	case "record":
		d.record(o, n, ptr)
	case "enum":
		d.enum(o, n, ptr)
	case "fixed":
		if o.size != n.size {
			d.add(ptr+"/size", "FIXED_SIZE_MISMATCH", fmt.Sprint(o.size), fmt.Sprint(n.size), true, true, "a fixed type cannot change size")
		}
	case "array":
		d.compare(o.items, n.items, ptr+"/items")
	case "map":
		d.compare(o.items, n.items, ptr+"/values")
	}
}

// findField returns the index of the field of fields that the reader field
// (name and aliases) matches by name, then by alias.
func findField(fields []avroField, name string, aliases []string) int {
	for i, f := range fields {
		if f.name == name {
			return i
		}
	}
	for i, f := range fields {
		if slices.Contains(aliases, f.name) {
			return i
		}
	}
	return -1
}

func (d *avroDiff) record(o, n *avroType, ptr string) {
	matchedOld := make([]bool, len(o.fields))
	for ni, nf := range n.fields {
		p := fmt.Sprintf("%s/fields/%d", ptr, ni)
		oi := findField(o.fields, nf.name, nf.aliases)
		if oi < 0 {
			if nf.hasDefault {
				d.add(p, "FIELD_ADDED", "", nf.name, false, false, "")
			} else {
				d.add(p, "READER_FIELD_MISSING_DEFAULT_VALUE", "", nf.name, true, false,
					fmt.Sprintf("data already written has no %q; give the field a default", nf.name))
			}
			continue
		}
		matchedOld[oi] = true
		of := o.fields[oi]
		if of.name != nf.name {
			// The new reader finds the old field through its alias; the old
			// reader finds the new field only through an alias of its own.
			fw := !slices.Contains(of.aliases, nf.name) && !of.hasDefault
			d.add(p+"/name", "FIELD_RENAMED_WITH_ALIAS", of.name, nf.name, false, fw,
				"old consumers look for \""+of.name+"\" in new data; keep a default on the old field or avoid renames")
		}
		if compactOr(defaultOr(of)) != compactOr(defaultOr(nf)) {
			// A default only matters when the field is missing from the writer.
			d.add(p+"/default", "DEFAULT_CHANGED", compactOrEmpty(defaultOr(of)), compactOrEmpty(defaultOr(nf)), false, false, "")
		}
		d.compare(of.typ, nf.typ, p+"/type")
	}
	for oi, of := range o.fields {
		if matchedOld[oi] {
			continue
		}
		p := fmt.Sprintf("%s/fields/%d", ptr, oi)
		if of.hasDefault {
			d.add(p, "FIELD_REMOVED", of.name, "", false, false, "")
		} else {
			d.add(p, "FIELD_REMOVED_WITHOUT_DEFAULT", of.name, "", false, true,
				fmt.Sprintf("old consumers need %q and it has no default (READER_FIELD_MISSING_DEFAULT_VALUE for them); keep the field, or remove only fields with defaults", of.name))
		}
	}
}

func defaultOr(f avroField) any {
	if !f.hasDefault {
		return absent
	}
	return f.def
}

func compactOrEmpty(v any) string {
	if v == absent {
		return ""
	}
	return compact(v)
}

func (d *avroDiff) enum(o, n *avroType, ptr string) {
	added, removed := setDiff(n.symbols, o.symbols), setDiff(o.symbols, n.symbols)
	if len(removed) > 0 {
		bw := n.def == nil // a reader default absorbs unknown symbols
		rule := "MISSING_ENUM_SYMBOLS"
		if !bw {
			rule = "ENUM_SYMBOL_REMOVED_WITH_DEFAULT"
		}
		d.add(ptr+"/symbols", rule, strings.Join(o.symbols, ","), strings.Join(n.symbols, ","), bw, false,
			"data already written may hold "+strings.Join(removed, ", ")+"; keep the symbols or give the enum a default")
	}
	if len(added) > 0 {
		fw := o.def == nil
		d.add(ptr+"/symbols", "ENUM_SYMBOL_ADDED", strings.Join(o.symbols, ","), strings.Join(n.symbols, ","), false, fw,
			"old consumers cannot read "+strings.Join(added, ", ")+" unless the old enum had a default")
	}
	if (o.def == nil) != (n.def == nil) || (o.def != nil && *o.def != *n.def) {
		d.add(ptr+"/default", "DEFAULT_CHANGED", strOrEmpty(o.def), strOrEmpty(n.def), false, false, "")
	}
}

func strOrEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// unions applies Avro's union rules: every branch of the writer must
// resolve to some branch of the reader.
func (d *avroDiff) unions(o, n *avroType, ptr string) {
	ob, nb := branches(o), branches(n)
	// Pair branches that share a kind and name, and compare them.
	for i, x := range nb {
		for _, y := range ob {
			if x.kind == y.kind && x.name == y.name {
				p := ptr
				if n.kind == "union" {
					p = fmt.Sprintf("%s/%d", ptr, i)
				}
				d.compare(y, x, p)
				break
			}
		}
	}
	for _, w := range ob {
		if !slices.ContainsFunc(nb, func(r *avroType) bool { return w.kind == r.kind && w.name == r.name }) {
			bw := !slices.ContainsFunc(nb, func(r *avroType) bool { return resolves(w, r) })
			rule := "UNION_BRANCH_REMOVED"
			if bw {
				rule = "MISSING_UNION_BRANCH"
			}
			if n.kind != "union" {
				rule = "TYPE_CHANGED_FROM_UNION"
			}
			d.add(ptr, rule, o.String(), n.String(), bw, false, "data already written may be a "+w.String()+"; keep that branch")
		}
	}
	for _, r := range nb {
		if !slices.ContainsFunc(ob, func(w *avroType) bool { return w.kind == r.kind && w.name == r.name }) {
			fw := !slices.ContainsFunc(ob, func(w *avroType) bool { return resolves(r, w) })
			rule := "UNION_BRANCH_ADDED"
			if o.kind != "union" {
				rule = "TYPE_CHANGED_TO_UNION"
			}
			d.add(ptr, rule, o.String(), n.String(), false, fw, "old consumers cannot read a "+r.String())
		}
	}
}

func branches(t *avroType) []*avroType {
	if t.kind == "union" {
		return t.branch
	}
	return []*avroType{t}
}
