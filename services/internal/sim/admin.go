package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// KnobValues reads the knob settings an admin request carries: a JSON
// object of knob names (values of any JSON type, taken as text) or a form
// (the first value of each name), reading at most limit bytes of a JSON
// body.
func KnobValues(r *http.Request, limit int64) (map[string]string, error) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var raw map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, limit)).Decode(&raw); err != nil {
			return nil, fmt.Errorf("body must be a JSON object of knob names: %w", err)
		}
		out := make(map[string]string, len(raw))
		for k, v := range raw {
			out[k] = fmt.Sprint(v)
		}
		return out, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, fmt.Errorf("bad form: %w", err)
	}
	out := make(map[string]string, len(r.Form))
	for k := range r.Form {
		out[k] = r.Form.Get(k)
	}
	return out, nil
}
