// Package inventoryapi serves the inventory service's operator endpoints:
//
//	POST /admin/stock   receive stock: {"items":[{"sku":"SKU-1","quantity":10}]}
//	GET  /stock         every SKU's available / reserved / committed
//
// Both are for operators, not customers: inventory-svc mounts them on its
// ops listener (--ops-addr) and has no public one.
//
// Errors are JSON {"error": "...", "field": "..."}. A receipt is checked by
// inventory.CheckReceipt before anything is stored; a body larger than
// MaxBody gets 413.
package inventoryapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

// MaxBody bounds a stock receipt's body: MaxReceiptLines lines fit well
// within it.
const MaxBody = 1 << 20

// Handler serves the inventory endpoints.
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
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &tooBig):
			kit.WriteBodyTooLarge(w, tooBig.Limit)
		case errors.As(err, &typ):
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%s: must be %s", typ.Field, typ.Type), "field": typ.Field})
		default:
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body must be {\"items\":[{\"sku\":…,\"quantity\":…}]}: " + err.Error()})
		}
		return
	}
	if err := inventory.CheckReceipt(req.Items); err != nil {
		var fe *inventory.FieldError
		errors.As(err, &fe)
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error(), "field": fe.Field})
		return
	}
	err := inventorystore.Receive(r.Context(), h.Pool, req.Items)
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "22003":
		// numeric_value_out_of_range: a bucket would pass the bigint limit.
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "items: stock would exceed the largest storable quantity", "field": "items"})
		return
	case err != nil:
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
