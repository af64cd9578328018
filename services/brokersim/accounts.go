package brokersim

import (
	"encoding/json"
	"net/http"
	"time"
)

// openAccount adds an ACTIVE account; called with s.mu held (or before the
// server is shared).
func (s *Server) openAccount(id string, firm bool, cash int64, contact, identity json.RawMessage) *Account {
	a := &Account{ID: id, AccountNumber: "9" + s.dice.digits(8), Status: "ACTIVE", Currency: "USD",
		CreatedAt: s.clock.Now().UTC(), Firm: firm, Cash: cash, Contact: contact, Identity: identity}
	s.st.Accounts = append(s.st.Accounts, a)
	s.st.accounts[id] = a
	s.dirty = true
	return a
}

func renderAccount(a *Account) map[string]any {
	out := map[string]any{
		"id": a.ID, "account_number": a.AccountNumber, "status": a.Status, "crypto_status": "INACTIVE",
		"currency": a.Currency, "last_equity": FormatAmount(a.Cash), "created_at": a.CreatedAt.Format(time.RFC3339Nano),
		"account_type": "trading",
	}
	if a.Contact != nil {
		out["contact"] = a.Contact
	}
	if a.Identity != nil {
		out["identity"] = a.Identity
	}
	return out
}

// createAccount opens an account at once: the simulator skips KYC, so the
// account is ACTIVE where Alpaca would answer SUBMITTED and approve later.
func (s *Server) createAccount(r *request) response {
	var body struct {
		Contact  json.RawMessage `json:"contact"`
		Identity json.RawMessage `json:"identity"`
	}
	if len(r.body) > 0 {
		if err := json.Unmarshal(r.body, &body); err != nil {
			return apiErr(http.StatusBadRequest, 40010000, "request body is not valid JSON")
		}
	}
	a := s.openAccount(s.dice.uuid(), false, 0, body.Contact, body.Identity)
	return jsonResponse(http.StatusOK, renderAccount(a))
}

func (s *Server) listAccounts(r *request) response {
	out := make([]map[string]any, 0, len(s.st.Accounts))
	for _, a := range s.st.Accounts {
		if !a.Firm {
			out = append(out, renderAccount(a))
		}
	}
	return jsonResponse(http.StatusOK, out)
}

func (s *Server) getAccount(r *request) response {
	a := s.st.accounts[r.hr.PathValue("account_id")]
	if a == nil {
		return apiErr(http.StatusNotFound, 40410000, "account not found")
	}
	return jsonResponse(http.StatusOK, renderAccount(a))
}

// getTradingAccount answers the trading account's cash, the balance a
// client's projection is checked against.
func (s *Server) getTradingAccount(r *request) response {
	a := s.st.accounts[r.hr.PathValue("account_id")]
	if a == nil {
		return apiErr(http.StatusNotFound, 40410000, "account not found")
	}
	cash := FormatAmount(a.Cash)
	return jsonResponse(http.StatusOK, map[string]any{
		"id": a.ID, "account_number": a.AccountNumber, "status": a.Status, "currency": a.Currency,
		"cash": cash, "cash_withdrawable": cash, "buying_power": cash, "equity": cash,
	})
}
