package providersim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/concordhq/concord/services/internal/sim"
)

// adminRoutes mounts the operator API. It is only mounted when
// Config.Admin is set; it has no authentication, so never expose it beyond
// a test network.
//
//	GET  /__admin/faults   current knobs by name
//	POST /__admin/faults   set knobs: form or JSON {"5xx-rate": "0.1", …};
//	                       all-or-nothing, 400 on an unknown name or bad value
//	POST /__admin/force    {"id": "pi_…", "status": "canceled", "emit_event": false}
//	                       sets a PaymentIntent's status directly (drift); no
//	                       event unless emit_event is true
//	GET  /__admin/stats    counters (webhooks sent/dropped/duplicated, …)
func (s *Server) adminRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /__admin/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Faults().Values())
	})
	m.HandleFunc("POST /__admin/faults", func(w http.ResponseWriter, r *http.Request) {
		values, err := sim.KnobValues(r, maxBody)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		s.mu.Lock()
		f := s.faults
		err = f.Apply(values)
		if err == nil {
			s.faults = f
		}
		s.mu.Unlock()
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		s.log.Info("providersim: faults changed", "faults", f.Values())
		writeJSON(w, http.StatusOK, f.Values())
	})
	m.HandleFunc("POST /__admin/force", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID        string `json:"id"`
			Status    string `json:"status"`
			EmitEvent bool   `json:"emit_event"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be JSON {id, status, emit_event}: " + err.Error()})
			return
		}
		if err := s.ForceStatus(req.ID, req.Status, req.EmitEvent); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": req.ID, "status": req.Status})
	})
	m.HandleFunc("GET /__admin/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
}

// ForceStatus sets a PaymentIntent's status without the usual transition,
// to make the provider disagree with what its clients were told. Unless
// emitEvent is set no event or webhook tells anyone; only reading the object
// (or reconciling) shows it.
func (s *Server) ForceStatus(id, status string, emitEvent bool) error {
	switch status {
	case StatusRequiresPaymentMethod, StatusRequiresConfirmation, StatusRequiresAction, StatusProcessing,
		StatusRequiresCapture, StatusCanceled, StatusSucceeded:
	default:
		return fmt.Errorf("providersim: force %s: unknown status %q", id, status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.st.piByID[id]
	if !ok {
		return fmt.Errorf("providersim: force %s: no such payment_intent", id)
	}
	prev := pi.Status
	pi.Status = status
	if status == StatusSucceeded && pi.ChargeID == "" {
		pi.ChargeID = "ch_" + strings.TrimPrefix(pi.ID, "pi_")
		pi.ChargeCreated = s.clock.Now().Unix()
	}
	s.stats.ForcedStatuses++
	s.dirty = true
	if emitEvent {
		s.emit(nil, "payment_intent."+eventVerb(status), s.renderPI(pi, false), map[string]any{"status": prev})
	}
	return nil
}

func eventVerb(status string) string {
	switch status {
	case StatusSucceeded:
		return "succeeded"
	case StatusCanceled:
		return "canceled"
	case StatusProcessing:
		return "processing"
	case StatusRequiresAction:
		return "requires_action"
	case StatusRequiresCapture:
		return "amount_capturable_updated"
	default:
		return "payment_failed"
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
