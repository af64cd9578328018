// Package orderapi serves the order API:
//
//	POST /orders          create (Idempotency-Key header honoured)   scope orders:write
//	GET  /orders/{id}     one order with its status history          scope orders:read
//	GET  /orders?status=  list, newest first (limit ≤ 500)           scope orders:read
//
// Every request presents an API key, "Authorization: Bearer KEY" (see
// package apikey): without a live key it gets 401 and WWW-Authenticate,
// with a key lacking the route's scope 403. A key restricted to a customer
// creates that customer's orders only and reads only theirs (another
// customer's order is 404, as if it did not exist). A repeated POST (the
// same Idempotency-Key and body) answers the first order as it is now, or
// only its id when the key may not read orders.
//
// Errors are JSON {"error": "...", "field": "..."}; a bad or refused
// request is refused before anything is stored.
package orderapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/order/apikey"
	"github.com/concordhq/concord/services/order/orderstore"
)

// MaxBody bounds a request body; larger bodies get 413.
const MaxBody = 64 << 10

// Store is what the API needs from storage.
type Store interface {
	Create(ctx context.Context, req order.Request, idemKey string) (orderstore.Order, bool, error)
	Get(ctx context.Context, id string) (orderstore.Order, error)
	List(ctx context.Context, status order.Status, customerID string, limit int) ([]orderstore.Order, error)
}

// Handler is the order API.
type Handler struct {
	Store Store
	// Keys authenticates every request; required.
	Keys Keys
	Log  *slog.Logger
	// DefaultFlow is the flow of a request that names none; empty means
	// choreographed.
	DefaultFlow order.Flow
}

// Register mounts the API on mux. It panics without Keys: the API is not
// served open.
func (h *Handler) Register(mux *http.ServeMux) {
	if h.Keys == nil {
		panic("orderapi: Handler.Keys is required")
	}
	mux.HandleFunc("POST /orders", h.authorized(apikey.OrdersWrite, h.create))
	mux.HandleFunc("GET /orders/{id}", h.authorized(apikey.OrdersRead, h.get))
	mux.HandleFunc("GET /orders", h.authorized(apikey.OrdersRead, h.list))
}

type apiError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
	// Scope is the scope a 403 lacked.
	Scope string `json:"scope,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request, k apikey.Key) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeJSON(w, http.StatusUnsupportedMediaType, apiError{Error: "Content-Type must be application/json"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > order.MaxIdempotencyKeyLen {
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("Idempotency-Key is longer than %d bytes", order.MaxIdempotencyKeyLen), Field: "Idempotency-Key"})
		return
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	var req order.Request
	if err := dec.Decode(&req); err != nil {
		h.decodeError(w, err)
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "body must hold exactly one JSON object"})
		return
	}
	if req.Flow == "" {
		req.Flow = h.DefaultFlow
	}
	if err := req.Validate(); err != nil {
		var fe *order.FieldError
		errors.As(err, &fe)
		writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error(), Field: fe.Field})
		return
	}
	if !k.MayActFor(req.CustomerID) {
		writeJSON(w, http.StatusForbidden, apiError{Error: "this API key creates orders of customer " + strconv.Quote(k.CustomerID) + " only", Field: "customer_id"})
		return
	}
	o, created, err := h.Store.Create(r.Context(), req, key)
	switch {
	case errors.Is(err, orderstore.ErrIdempotencyConflict):
		// The message names no order: the key may have been used by
		// another client, whose order this one may not read.
		writeJSON(w, http.StatusUnprocessableEntity, apiError{Error: orderstore.ErrIdempotencyConflict.Error(), Field: "Idempotency-Key"})
		return
	case err != nil:
		h.Log.ErrorContext(r.Context(), "create order", "err", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "order not stored; retry with the same Idempotency-Key"})
		return
	}
	w.Header().Set("Location", "/orders/"+o.ID)
	switch {
	case created:
		writeJSON(w, http.StatusCreated, o)
	case !k.Allows(apikey.OrdersRead):
		// A repeat answers with the order as it is now, which is reading
		// it: a key that may not read gets the id its retry needs, no more.
		writeJSON(w, http.StatusOK, map[string]string{"id": o.ID})
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

func (h *Handler) decodeError(w http.ResponseWriter, err error) {
	var tooBig *http.MaxBytesError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		kit.WriteBodyTooLarge(w, tooBig.Limit)
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF):
		writeJSON(w, http.StatusBadRequest, apiError{Error: "malformed JSON: " + err.Error()})
	case errors.As(err, &typ):
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("%s: must be %s", typ.Field, typ.Type), Field: typ.Field})
	case errors.Is(err, io.EOF):
		writeJSON(w, http.StatusBadRequest, apiError{Error: "empty body: send a JSON order"})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		writeJSON(w, http.StatusBadRequest, apiError{Error: "unknown field " + strconv.Quote(f), Field: f})
	default:
		writeJSON(w, http.StatusBadRequest, apiError{Error: "bad body: " + err.Error()})
	}
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, k apikey.Key) {
	o, err := h.Store.Get(r.Context(), r.PathValue("id"))
	switch {
	// Another customer's order is answered as a missing one: a key
	// restricted to a customer learns nothing of the others' orders.
	case errors.Is(err, orderstore.ErrNotFound) || isBadUUID(err) || (err == nil && !k.MayActFor(o.CustomerID)):
		writeJSON(w, http.StatusNotFound, apiError{Error: "no order " + strconv.Quote(r.PathValue("id"))})
	case err != nil:
		h.Log.ErrorContext(r.Context(), "get order", "order_id", r.PathValue("id"), "err", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "could not read order"})
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

// isBadUUID reports Postgres refusing a malformed id: no such order.
func isBadUUID(err error) bool {
	return err != nil && strings.Contains(err.Error(), "invalid input syntax for type uuid")
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request, k apikey.Key) {
	var st order.Status
	if s := r.URL.Query().Get("status"); s != "" {
		var ok bool
		if st, ok = order.ParseStatus(s); !ok {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "status must be PENDING, RESERVED, CONFIRMED or CANCELLED", Field: "status"})
			return
		}
	}
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 500 {
			writeJSON(w, http.StatusBadRequest, apiError{Error: "limit must be 1..500", Field: "limit"})
			return
		}
		limit = n
	}
	orders, err := h.Store.List(r.Context(), st, k.CustomerID, limit)
	if err != nil {
		h.Log.ErrorContext(r.Context(), "list orders", "err", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "could not list orders"})
		return
	}
	if orders == nil {
		orders = []orderstore.Order{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"orders": orders})
}
