package brokersim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/concordhq/concord/services/internal/sim"
)

// adminRoutes mounts the operator API, only when Config.Admin is set. It
// has no authentication: never expose it beyond a test network.
//
//	GET  /__admin/faults                      current knobs by name
//	POST /__admin/faults                      set knobs (form or JSON {"sse-drop-rate": "0.1"});
//	                                          all-or-nothing, 400 on an unknown name or bad value
//	POST /__admin/journals/{id}/correct       {"amount": "12.34"}: correct an executed journal now
//	POST /__admin/transfers/{id}/return       {"reason": "…"}: return a COMPLETE transfer now
//	GET  /__admin/stats                       counters
//	GET  /__admin/firm                        {"firm_account": "<id>"}
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
		s.log.Info("brokersim: faults changed", "faults", f.Values())
		writeJSON(w, http.StatusOK, f.Values())
	})
	m.HandleFunc("POST /__admin/journals/{id}/correct", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Amount string `json:"amount"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be JSON {amount}: " + err.Error()})
			return
		}
		id, err := s.CorrectJournal(r.Context(), r.PathValue("id"), req.Amount)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"corrected": r.PathValue("id"), "id": id})
	})
	m.HandleFunc("POST /__admin/transfers/{id}/return", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Reason string `json:"reason"`
		}
		_ = json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req) // the reason is optional
		if err := s.ReturnTransfer(r.Context(), r.PathValue("id"), req.Reason); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"id": r.PathValue("id"), "status": TransferReturned})
	})
	m.HandleFunc("GET /__admin/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	m.HandleFunc("GET /__admin/firm", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"firm_account": s.FirmAccountID()})
	})
}

// CorrectJournal corrects an executed cash journal now: the original moves
// to correct and a new journal with amount is executed; it returns the new
// journal's id once the change is written.
func (s *Server) CorrectJournal(ctx context.Context, id, amount string) (string, error) {
	cents, err := ParseAmount(amount)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	j := s.st.journals[id]
	if j == nil || j.Status != JournalExecuted {
		s.mu.Unlock()
		return "", fmt.Errorf("brokersim: journal %q is not an executed journal", id)
	}
	nj := s.correctJournal(j, cents, s.clock.Now().UTC())
	need := s.durableAfter()
	s.mu.Unlock()
	if !s.waitDurable(ctx, need) {
		return "", errors.New("brokersim: correction not written")
	}
	return nj.ID, nil
}

// ReturnTransfer returns a COMPLETE transfer now (COMPLETE → RETURNED).
func (s *Server) ReturnTransfer(ctx context.Context, id, reason string) error {
	if reason == "" {
		reason = "R01 insufficient funds"
	}
	s.mu.Lock()
	t := s.st.transfers[id]
	if t == nil || t.Status != TransferComplete {
		s.mu.Unlock()
		return fmt.Errorf("brokersim: transfer %q is not COMPLETE", id)
	}
	s.returnTransfer(t, reason, s.clock.Now().UTC())
	need := s.durableAfter()
	s.mu.Unlock()
	if !s.waitDurable(ctx, need) {
		return errors.New("brokersim: return not written")
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
