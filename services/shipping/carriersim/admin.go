package carriersim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// adminRoutes mounts the operator API (Config.Admin). It has no
// authentication: never expose it beyond a test network.
//
//	GET  /__admin/faults   current knobs by name
//	POST /__admin/faults   set knobs: JSON {"5xx-next": "3", …} or a form;
//	                       all-or-nothing, 400 naming an unknown knob or bad value
//	POST /__admin/ship     {"id": "shp_…"}: the shipment leaves, cancel gets 409
//	GET  /__admin/stats    counters
func (s *Server) adminRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /__admin/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Faults().Values())
	})
	m.HandleFunc("POST /__admin/faults", func(w http.ResponseWriter, r *http.Request) {
		values, err := readAdminValues(r)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		f, err := s.SetFaults(values)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		s.log.Info("carriersim: faults changed", "faults", f.Values())
		writeJSON(w, http.StatusOK, f.Values())
	})
	m.HandleFunc("POST /__admin/ship", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil || req.ID == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": `body must be JSON {"id": "shp_…"}`})
			return
		}
		if err := s.Ship(req.ID); err != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": req.ID, "status": StatusShipped})
	})
	m.HandleFunc("GET /__admin/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
}

func readAdminValues(r *http.Request) (map[string]string, error) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var raw map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&raw); err != nil {
			return nil, fmt.Errorf("body must be a JSON object of knob names: %w", err)
		}
		out := make(map[string]string, len(raw))
		for k, v := range raw {
			switch v := v.(type) {
			case string:
				out[k] = v
			default:
				out[k] = fmt.Sprint(v)
			}
		}
		return out, nil
	}
	if err := r.ParseForm(); err != nil {
		return nil, fmt.Errorf("form: %w", err)
	}
	out := make(map[string]string, len(r.PostForm))
	for k, v := range r.PostForm {
		if len(v) > 0 {
			out[k] = v[len(v)-1]
		}
	}
	return out, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
