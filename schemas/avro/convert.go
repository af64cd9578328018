package avro

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/linkedin/goavro/v2"
)

// collectNames indexes the named types of a schema by full name (and short
// name) so references resolve while converting.
func collectNames(s any, ns string, names map[string]any) {
	switch x := s.(type) {
	case []any:
		for _, b := range x {
			collectNames(b, ns, names)
		}
	case map[string]any:
		t, _ := x["type"].(string)
		if name, ok := x["name"].(string); ok && (t == "record" || t == "enum" || t == "fixed" || t == "error") {
			if n, ok := x["namespace"].(string); ok {
				ns = n
			}
			full := name
			if !strings.Contains(name, ".") && ns != "" {
				full = ns + "." + name
			}
			names[full], names[name] = x, x
			if i := strings.LastIndex(full, "."); i >= 0 {
				ns = full[:i]
			}
		}
		if fields, ok := x["fields"].([]any); ok {
			for _, f := range fields {
				if fm, ok := f.(map[string]any); ok {
					collectNames(fm["type"], ns, names)
				}
			}
		}
		for _, k := range []string{"items", "values"} {
			if v, ok := x[k]; ok {
				collectNames(v, ns, names)
			}
		}
		if _, ok := x["type"].(string); !ok {
			collectNames(x["type"], ns, names)
		}
	}
}

// kind returns the Avro type name of a schema node and the node with named
// references resolved.
func (c *codec) kind(s any) (string, any) {
	switch x := s.(type) {
	case string:
		if n, ok := c.names[x]; ok {
			return c.kind(n)
		}
		return x, x
	case []any:
		return "union", x
	case map[string]any:
		if t, ok := x["type"].(string); ok {
			if _, named := c.names[t]; named {
				return c.kind(t)
			}
			return t, x
		}
		return c.kind(x["type"])
	}
	return "", s
}

// branchName is the name goavro uses for a union branch.
func (c *codec) branchName(s any) string {
	k, n := c.kind(s)
	if m, ok := n.(map[string]any); ok {
		if name, ok := m["name"].(string); ok && (k == "record" || k == "enum" || k == "fixed") {
			ns, _ := m["namespace"].(string)
			for full, v := range c.names {
				if fmt.Sprint(v) == fmt.Sprint(m) && strings.Contains(full, ".") {
					return full
				}
			}
			if ns != "" && !strings.Contains(name, ".") {
				return ns + "." + name
			}
			return name
		}
	}
	return k
}

// toNative maps a JSON value (decoded with UseNumber) onto the Go values
// goavro expects for schema s. A missing field takes its default.
func (c *codec) toNative(s any, v any, ptr string) (any, error) {
	k, node := c.kind(s)
	switch k {
	case "null":
		if v != nil {
			return nil, fmt.Errorf("%s: want null, got %T", ptr, v)
		}
		return nil, nil
	case "boolean":
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("%s: want boolean, got %T", ptr, v)
		}
		return b, nil
	case "int", "long":
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s: want integer, got %T", ptr, v)
		}
		i, err := n.Int64()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ptr, err)
		}
		if k == "int" {
			if int64(int32(i)) != i {
				return nil, fmt.Errorf("%s: %d overflows an Avro int", ptr, i)
			}
			return int32(i), nil
		}
		return i, nil
	case "float", "double":
		n, ok := v.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s: want number, got %T", ptr, v)
		}
		f, err := n.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ptr, err)
		}
		if k == "float" {
			return float32(f), nil
		}
		return f, nil
	case "string", "enum":
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want string, got %T", ptr, v)
		}
		return str, nil
	case "bytes", "fixed":
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s: want base64 string, got %T", ptr, v)
		}
		return base64.StdEncoding.DecodeString(str)
	case "array":
		arr, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s: want array, got %T", ptr, v)
		}
		out := make([]any, len(arr))
		for i, x := range arr {
			var err error
			if out[i], err = c.toNative(node.(map[string]any)["items"], x, fmt.Sprintf("%s/%d", ptr, i)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "map":
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want object, got %T", ptr, v)
		}
		out := make(map[string]any, len(m))
		for key, x := range m {
			var err error
			if out[key], err = c.toNative(node.(map[string]any)["values"], x, ptr+"/"+key); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "record":
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want object, got %T", ptr, v)
		}
		fields, _ := node.(map[string]any)["fields"].([]any)
		out := make(map[string]any, len(fields))
		known := map[string]bool{}
		for _, f := range fields {
			fm := f.(map[string]any)
			name := fm["name"].(string)
			known[name] = true
			x, present := m[name]
			if !present {
				if _, hasDefault := fm["default"]; hasDefault {
					continue // goavro fills the default
				}
				return nil, fmt.Errorf("%s/%s: missing and has no default", ptr, name)
			}
			nv, err := c.toNative(fm["type"], x, ptr+"/"+name)
			if err != nil {
				return nil, err
			}
			out[name] = nv
		}
		for name := range m {
			if !known[name] {
				return nil, fmt.Errorf("%s/%s: not a field of the Avro schema", ptr, name)
			}
		}
		return out, nil
	case "union":
		var errs []string
		for _, b := range node.([]any) {
			bk, _ := c.kind(b)
			if v == nil {
				if bk == "null" {
					return nil, nil
				}
				continue
			}
			if bk == "null" {
				continue
			}
			nv, err := c.toNative(b, v, ptr)
			if err == nil {
				return goavro.Union(c.branchName(b), nv), nil
			}
			errs = append(errs, err.Error())
		}
		return nil, fmt.Errorf("%s: no union branch fits: %s", ptr, strings.Join(errs, "; "))
	}
	return nil, fmt.Errorf("%s: unsupported Avro type %q", ptr, k)
}

// fromNative maps goavro's decoded values back to JSON values: unions lose
// their branch wrapper, bytes become base64, and fields whose value is a
// null union branch are left out, as the JSON envelope leaves them out.
func (c *codec) fromNative(s any, v any, ptr string) (any, error) {
	k, node := c.kind(s)
	switch k {
	case "bytes", "fixed":
		b, _ := v.([]byte)
		return base64.StdEncoding.EncodeToString(b), nil
	case "array":
		arr, _ := v.([]any)
		out := make([]any, len(arr))
		for i, x := range arr {
			var err error
			if out[i], err = c.fromNative(node.(map[string]any)["items"], x, fmt.Sprintf("%s/%d", ptr, i)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "map":
		m, _ := v.(map[string]any)
		out := make(map[string]any, len(m))
		for key, x := range m {
			var err error
			if out[key], err = c.fromNative(node.(map[string]any)["values"], x, ptr+"/"+key); err != nil {
				return nil, err
			}
		}
		return out, nil
	case "record":
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want record, got %T", ptr, v)
		}
		out := map[string]any{}
		for _, f := range node.(map[string]any)["fields"].([]any) {
			fm := f.(map[string]any)
			name := fm["name"].(string)
			x, err := c.fromNative(fm["type"], m[name], ptr+"/"+name)
			if err != nil {
				return nil, err
			}
			if x == nil {
				if fk, _ := c.kind(fm["type"]); fk == "union" {
					continue
				}
			}
			out[name] = x
		}
		return out, nil
	case "union":
		if v == nil {
			return nil, nil
		}
		wrapped, ok := v.(map[string]any)
		if !ok || len(wrapped) != 1 {
			return nil, fmt.Errorf("%s: want a union value, got %T", ptr, v)
		}
		for name, x := range wrapped {
			for _, b := range node.([]any) {
				if c.branchName(b) == name {
					return c.fromNative(b, x, ptr)
				}
			}
			return nil, fmt.Errorf("%s: unknown union branch %q", ptr, name)
		}
	}
	return v, nil
}
