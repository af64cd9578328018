// Package fundingapi is funding-svc's HTTP API: deposits and withdrawals
// by cash journal (between the firm's account and the customer's) and by
// ACH transfer (between the customer's bank and their account), the
// movements as the service mirrors them, and the balance of an account as
// the service books it and as its consumer of account-events projects it.
package fundingapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/concordhq/concord/services/funding/fundingjournal"
	"github.com/concordhq/concord/services/funding/fundingprojection"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/funding/fundingtransfer"
)

// Handler serves the API.
type Handler struct {
	Store  *fundingstore.Store
	Writer *fundingjournal.Writer
	// Transfers submits ACH transfers; nil leaves /v1/funding/transfers out.
	Transfers *fundingtransfer.Writer
	// Projection adds to the balance answer the one funding-svc's consumer
	// of account-events built (fundingprojection), which must then run on
	// the same database.
	Projection bool
	Log        *slog.Logger
}

// Register mounts the endpoints on mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/funding/journals", h.submit)
	if h.Transfers != nil {
		mux.HandleFunc("POST /v1/funding/transfers", h.transfer)
	}
	mux.HandleFunc("GET /v1/funding/movements/{key}", h.movement)
	mux.HandleFunc("GET /v1/funding/accounts/{account_id}/balance", h.balance)
}

// JournalRequest is POST /v1/funding/journals: a deposit moves Amount
// (cents) from the firm to the account, a withdrawal from the account to
// the firm. RequestID names the business request: the same one submitted
// again is the same journal.
type JournalRequest struct {
	RequestID string `json:"request_id"`
	AccountID string `json:"account_id"`
	Kind      string `json:"kind"` // deposit | withdrawal
	Amount    int64  `json:"amount"`
}

// Movement is a movement as the API shows it.
type Movement struct {
	Key          string    `json:"key,omitempty"`
	BrokerID     string    `json:"broker_id,omitempty"`
	Domain       string    `json:"domain"`
	AccountID    string    `json:"account_id"`
	Direction    string    `json:"direction"`
	Amount       int64     `json:"amount"`
	Currency     string    `json:"currency"`
	Status       string    `json:"status"`
	BrokerStatus string    `json:"broker_status,omitempty"`
	UpdatedAt    time.Time `json:"updated_at"`
}

func view(m fundingstore.Movement) Movement {
	return Movement{Key: m.IntentKey, BrokerID: m.BrokerID, Domain: string(m.Domain), AccountID: m.AccountID, Direction: string(m.Direction),
		Amount: m.Amount, Currency: m.Currency, Status: string(m.Status), BrokerStatus: m.BrokerStatus, UpdatedAt: m.UpdatedAt}
}

func (h *Handler) submit(w http.ResponseWriter, r *http.Request) {
	var req JournalRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		problem(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	dir, ok := direction(req.Kind)
	if !ok {
		problem(w, http.StatusBadRequest, `kind: want "deposit" or "withdrawal"`)
		return
	}
	if req.RequestID == "" || req.AccountID == "" || req.Amount <= 0 {
		problem(w, http.StatusBadRequest, "request_id, account_id and a positive amount (cents) are required")
		return
	}
	m, err := h.Writer.Submit(r.Context(), fundingjournal.Request{RequestID: req.RequestID, AccountID: req.AccountID, Direction: dir, Amount: req.Amount})
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, view(m))
	case errors.Is(err, fundingstore.ErrIntentConflict):
		problem(w, http.StatusConflict, "request_id was used for another request")
	case errors.Is(err, fundingjournal.ErrKeyConflict):
		problem(w, http.StatusConflict, "the broker holds another request under this request's key; sent to review")
	case errors.Is(err, fundingjournal.ErrUnknownOutcome):
		// The intent is recorded: the same request submitted again, or the
		// service's own resume, finds or makes the journal once.
		problem(w, http.StatusServiceUnavailable, "the broker's answer is unknown; submit the same request again")
	default:
		if h.Log != nil {
			h.Log.Warn("journal submit", "request_id", req.RequestID, "err", err)
		}
		problem(w, http.StatusBadGateway, err.Error())
	}
}

// TransferRequest is POST /v1/funding/transfers: an ACH deposit (from the
// bank relationship to the account) or withdrawal (back to it).
type TransferRequest struct {
	RequestID      string `json:"request_id"`
	AccountID      string `json:"account_id"`
	RelationshipID string `json:"relationship_id"`
	Kind           string `json:"kind"` // deposit | withdrawal
	Amount         int64  `json:"amount"`
}

func (h *Handler) transfer(w http.ResponseWriter, r *http.Request) {
	var req TransferRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
		problem(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	dir, ok := direction(req.Kind)
	if !ok || req.RequestID == "" || req.AccountID == "" || req.RelationshipID == "" || req.Amount <= 0 {
		problem(w, http.StatusBadRequest, `request_id, account_id, relationship_id, kind ("deposit" or "withdrawal") and a positive amount (cents) are required`)
		return
	}
	m, err := h.Transfers.Submit(r.Context(), fundingtransfer.Request{RequestID: req.RequestID, AccountID: req.AccountID,
		RelationshipID: req.RelationshipID, Direction: dir, Amount: req.Amount})
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, view(m))
	case errors.Is(err, fundingstore.ErrIntentConflict):
		problem(w, http.StatusConflict, "request_id was used for another request")
	case errors.Is(err, fundingtransfer.ErrAmbiguous):
		problem(w, http.StatusConflict, "several of the broker's transfers could be this request's; sent to review")
	case errors.Is(err, fundingtransfer.ErrUnknownOutcome):
		problem(w, http.StatusServiceUnavailable, "the broker's answer is unknown; submit the same request again")
	default:
		if h.Log != nil {
			h.Log.Warn("transfer submit", "request_id", req.RequestID, "err", err)
		}
		problem(w, http.StatusBadGateway, err.Error())
	}
}

func direction(kind string) (fundingstore.Direction, bool) {
	switch kind {
	case "deposit":
		return fundingstore.Credit, true
	case "withdrawal":
		return fundingstore.Debit, true
	}
	return "", false
}

func (h *Handler) movement(w http.ResponseWriter, r *http.Request) {
	m, err := h.Store.ByKey(r.Context(), r.PathValue("key"))
	switch {
	case errors.Is(err, fundingstore.ErrNotFound):
		problem(w, http.StatusNotFound, "no movement with this key")
	case err != nil:
		problem(w, http.StatusInternalServerError, err.Error())
	default:
		writeJSON(w, http.StatusOK, view(m))
	}
}

func (h *Handler) balance(w http.ResponseWriter, r *http.Request) {
	account := r.PathValue("account_id")
	b, err := h.Store.Balance(r.Context(), account, "USD")
	if err != nil {
		problem(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := map[string]any{"account_id": account, "currency": "USD", "balance": b}
	if h.Projection {
		p, err := fundingprojection.Read(r.Context(), h.Store.Pool, account, "USD")
		if err != nil {
			problem(w, http.StatusInternalServerError, err.Error())
			return
		}
		out["projection"] = p
	}
	writeJSON(w, http.StatusOK, out)
}

func problem(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]any{"status": status, "detail": detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
