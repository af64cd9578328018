package providersim

import (
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxBody bounds a request body; Stripe's own limit is far higher, but no
// call in this subset comes close.
const maxBody = 1 << 20

// formValues are the request's parameters in Stripe's bracket notation
// (metadata[order_id]=…, created[gte]=…), from the query string on GET and
// the form-encoded body on POST.
type formValues url.Values

// parseForm reads the parameters. A body that is not form encoding, or is
// not valid form encoding, is a 400 invalid_request_error.
func parseForm(r *http.Request) (formValues, *apiError) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, invalidRequest("", "", "Invalid query string: "+err.Error())
	}
	if r.Method != http.MethodPost {
		return formValues(q), nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, invalidRequest("", "", "Could not read the request body: "+err.Error())
	}
	if len(body) > maxBody {
		return nil, invalidRequest("", "", "The request body is too large.")
	}
	if len(body) > 0 {
		if ct := r.Header.Get("Content-Type"); ct != "" {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || mt != "application/x-www-form-urlencoded" {
				return nil, invalidRequest("", "", "Invalid request: the body must be application/x-www-form-urlencoded, not "+ct+".")
			}
		}
		b, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, invalidRequest("", "", "Invalid request body: it is not valid form encoding ("+err.Error()+").")
		}
		for k, vs := range b {
			q[k] = append(q[k], vs...)
		}
	}
	return formValues(q), nil
}

func (f formValues) get(k string) (string, bool) {
	vs, ok := f[k]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// only refuses parameters this endpoint does not know, as Stripe does.
// Names ending in "[" allow any key with that prefix.
func (f formValues) only(allowed ...string) *apiError {
next:
	for k := range f {
		for _, a := range allowed {
			if k == a || (strings.HasSuffix(a, "[") && strings.HasPrefix(k, a)) {
				continue next
			}
		}
		return invalidRequest("parameter_unknown", k, "Received unknown parameter: "+k)
	}
	return nil
}

// int reads an optional integer parameter.
func (f formValues) int(k string) (int64, bool, *apiError) {
	v, ok := f.get(k)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, invalidRequest("parameter_invalid_integer", k, "Invalid integer: "+v)
	}
	return n, true, nil
}

// bool reads an optional boolean parameter.
func (f formValues) bool(k string) (bool, *apiError) {
	v, ok := f.get(k)
	if !ok {
		return false, nil
	}
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalidRequest("", k, "Invalid boolean: "+v)
}

// metadata collects metadata[key]=value pairs (at most 50, as on Stripe).
func (f formValues) metadata() (map[string]string, *apiError) {
	md := make(map[string]string)
	for k := range f {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") {
			name = strings.TrimSuffix(name, "]")
			if name == "" || len(name) > 40 {
				return nil, invalidRequest("", k, "Invalid metadata key: "+k)
			}
			v, _ := f.get(k)
			if len(v) > 500 {
				return nil, invalidRequest("", k, "Metadata values can have up to 500 characters.")
			}
			if v != "" { // an empty value unsets the key, as on Stripe
				md[name] = v
			}
		}
	}
	if len(md) > 50 {
		return nil, invalidRequest("", "metadata", "Metadata can have up to 50 keys.")
	}
	return md, nil
}

// expands reports whether expand[]=field (in any of Stripe's spellings) was asked for.
func (f formValues) expands(field string) bool {
	for k, vs := range f {
		if k == "expand" || strings.HasPrefix(k, "expand[") {
			for _, v := range vs {
				if v == field {
					return true
				}
			}
		}
	}
	return false
}

// createdRange reads created=<unix> or created[gt|gte|lt|lte]=<unix> into an
// inclusive [lo, hi] window.
func (f formValues) createdRange() (lo, hi int64, aerr *apiError) {
	lo, hi = -1<<62, 1<<62
	if v, ok, e := f.int("created"); e != nil {
		return 0, 0, e
	} else if ok {
		return v, v, nil
	}
	for _, op := range []string{"gt", "gte", "lt", "lte"} {
		v, ok, e := f.int("created[" + op + "]")
		if e != nil {
			return 0, 0, e
		}
		if !ok {
			continue
		}
		switch op {
		case "gt":
			lo = max(lo, v+1)
		case "gte":
			lo = max(lo, v)
		case "lt":
			hi = min(hi, v-1)
		case "lte":
			hi = min(hi, v)
		}
	}
	return lo, hi, nil
}
