// Package inventoryapi serves the inventory service's API:
//
//	POST /admin/stock   receive stock: {"items":[{"sku":"SKU-1","quantity":10}]}
//	GET  /stock         every SKU's available / reserved / committed
package inventoryapi

import (
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

// Handler is the inventory API.
type Handler struct {
	Pool *pgxpool.Pool
	Log  *slog.Logger
}

// Register mounts the API on mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /admin/stock", h.receive)
	mux.HandleFunc("GET /stock", h.list)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *Handler) receive(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Items []inventory.Line `json:"items"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {\"items\":[{\"sku\":…,\"quantity\":…}]}: " + err.Error()})
		return
	}
	if len(req.Items) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "items: at least one line is required", "field": "items"})
		return
	}
	if _, err := inventory.Normalize(req.Items); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "items: " + err.Error(), "field": "items"})
		return
	}
	if err := inventorystore.Receive(r.Context(), h.Pool, req.Items); err != nil {
		h.Log.Error("receive stock", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "stock not received"})
		return
	}
	h.list(w, r)
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	st, err := inventorystore.ListStock(r.Context(), h.Pool)
	if err != nil {
		h.Log.Error("list stock", "err", err)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "could not read stock"})
		return
	}
	if st == nil {
		st = []inventorystore.Stock{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"stock": st})
}
