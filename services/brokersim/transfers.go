package brokersim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

type transferRequest struct {
	TransferType          string `json:"transfer_type"`
	Amount                string `json:"amount"`
	Direction             string `json:"direction"`
	RelationshipID        string `json:"relationship_id"`
	BankID                string `json:"bank_id"`
	FeePaymentMethod      string `json:"fee_payment_method"`
	AdditionalInformation string `json:"additional_information"`
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func renderTransfer(t *Transfer) map[string]any {
	return map[string]any{
		"id": t.ID, "account_id": t.AccountID, "type": t.Type, "status": t.Status, "reason": nullable(t.Reason),
		"amount": FormatAmount(t.Amount), "requested_amount": FormatAmount(t.Amount), "instant_amount": "0",
		"fee": "0", "fee_payment_method": t.FeePaymentMethod, "direction": t.Direction,
		"relationship_id": nullable(t.RelationshipID), "bank_id": nullable(t.BankID),
		"additional_information": nullable(t.AdditionalInformation),
		"created_at":             t.CreatedAt.Format(time.RFC3339Nano), "updated_at": t.UpdatedAt.Format(time.RFC3339Nano),
		"expires_at": nil, "hold_until": nil,
	}
}

// createTransfer is POST /v1/accounts/{account_id}/transfers. Alpaca takes
// no Idempotency-Key here, and neither does the simulator: a retry is a
// second transfer.
func (s *Server) createTransfer(r *request) response {
	a := s.st.accounts[r.hr.PathValue("account_id")]
	if a == nil {
		return apiErr(http.StatusNotFound, 40410000, "account not found")
	}
	var req transferRequest
	if err := json.Unmarshal(r.body, &req); err != nil {
		return apiErr(http.StatusBadRequest, 40010000, "request body is not valid JSON")
	}
	amount, err := ParseAmount(req.Amount)
	if err != nil {
		return apiErr(http.StatusBadRequest, 40010000, err.Error())
	}
	switch {
	case req.TransferType != "ach" && req.TransferType != "wire":
		return apiErr(http.StatusBadRequest, 40010000, "transfer_type must be ach or wire")
	case req.Direction != "INCOMING" && req.Direction != "OUTGOING":
		return apiErr(http.StatusBadRequest, 40010000, "direction must be INCOMING or OUTGOING")
	case req.TransferType == "wire" && req.Direction == "INCOMING":
		return apiErr(http.StatusUnprocessableEntity, 40010001, "cannot submit incoming wire transfer using this API")
	case req.TransferType == "ach" && req.RelationshipID == "":
		return apiErr(http.StatusUnprocessableEntity, 42210000, "relationship_id is required for ach transfers")
	case req.TransferType == "wire" && req.BankID == "":
		return apiErr(http.StatusUnprocessableEntity, 42210000, "bank_id is required for wire transfers")
	case req.FeePaymentMethod != "" && req.FeePaymentMethod != "user" && req.FeePaymentMethod != "invoice":
		return apiErr(http.StatusBadRequest, 40010000, "fee_payment_method must be user or invoice")
	case a.Firm:
		return apiErr(http.StatusForbidden, 40310000, "deposits/withdrawals are not permitted for this account")
	case req.Direction == "OUTGOING" && a.Cash < amount:
		return apiErr(http.StatusForbidden, 40310000, "insufficient balance for withdrawal")
	}
	fee := req.FeePaymentMethod
	if fee == "" {
		fee = "user"
	}
	t := &Transfer{ID: s.dice.uuid(), AccountID: a.ID, Type: req.TransferType, Direction: req.Direction,
		Amount: amount, RelationshipID: req.RelationshipID, BankID: req.BankID, FeePaymentMethod: fee,
		AdditionalInformation: req.AdditionalInformation, CreatedAt: r.now, UpdatedAt: r.now, Step: s.cfg.SettlementDelay}
	if s.dice.Chance(streamSlow, s.faults.SlowSettlementRate) {
		s.stats.SlowSettlements++
		t.Step = s.faults.SlowSettlementDelay
	}
	s.st.Transfers = append(s.st.Transfers, t)
	s.st.transfers[t.ID] = t
	s.setTransferStatus(t, TransferQueued, "", r.now)
	s.schedule(r.now.Add(t.Step), jobTransferAdvance, t.ID)
	return jsonResponse(http.StatusOK, renderTransfer(t))
}

// setTransferStatus moves a transfer and records the funding status event;
// called with s.mu held.
func (s *Server) setTransferStatus(t *Transfer, to, reason string, now time.Time) {
	if err := TransferTransition(t.Status, to); err != nil {
		panic("brokersim: " + err.Error())
	}
	from := t.Status
	t.Status, t.UpdatedAt = to, now
	if reason != "" {
		t.Reason = reason
	}
	s.dirty = true
	s.appendEvent(&s.st.FundingLog, now, []string{t.AccountID}, func(id string) map[string]any {
		ev := map[string]any{"event_id": id, "at": now.Format(time.RFC3339Nano), "account_id": t.AccountID,
			"correspondent": s.cfg.Correspondent, "entity_id": t.ID, "entity_type": "Transfer",
			"status_from": from, "status_to": to}
		if reason != "" {
			ev["reason"] = reason
		}
		return ev
	})
}

// advanceTransfer takes one settlement step: QUEUED → SENT_TO_CLEARING →
// COMPLETE. COMPLETE moves the cash and publishes a CSD or CSW activity; an
// ACH transfer may then be returned.
func (s *Server) advanceTransfer(t *Transfer, now time.Time) {
	switch t.Status {
	case TransferQueued:
		s.setTransferStatus(t, TransferSentToClearing, "", now)
		s.schedule(now.Add(t.Step), jobTransferAdvance, t.ID)
	case TransferSentToClearing:
		a := s.st.accounts[t.AccountID]
		cents, typ := t.Amount, "CSD"
		if t.Direction == "OUTGOING" {
			cents, typ = -t.Amount, "CSW"
		}
		a.Cash += cents
		s.setTransferStatus(t, TransferComplete, "", now)
		t.ActivityRef = s.activity(t.AccountID, typ, "", cents, now, "", map[string]any{"transfer_id": t.ID}, "")
		if t.Type == "ach" && s.dice.Chance(streamReturn, s.faults.ReturnRate) {
			s.schedule(now.Add(s.faults.ReturnDelay), jobTransferReturn, t.ID)
		}
	}
}

// returnTransfer is an ACH return after COMPLETE: the cash goes back and a
// new activity of the same type with the opposite amount is published.
func (s *Server) returnTransfer(t *Transfer, reason string, now time.Time) {
	a := s.st.accounts[t.AccountID]
	cents, typ := -t.Amount, "CSD"
	if t.Direction == "OUTGOING" {
		cents, typ = t.Amount, "CSW"
	}
	a.Cash += cents
	s.stats.Returns++
	s.setTransferStatus(t, TransferReturned, reason, now)
	s.activity(t.AccountID, typ, "RETURN", cents, now, "", map[string]any{"transfer_id": t.ID, "returned_ref_id": t.ActivityRef}, reason)
}

// listTransfers is GET /v1/accounts/{account_id}/transfers: newest first,
// direction, limit and offset. Alpaca documents no GET by id, so a client
// finds one transfer (an outgoing wire, say) only in this list.
func (s *Server) listTransfers(r *request) response {
	id := r.hr.PathValue("account_id")
	if s.st.accounts[id] == nil {
		return apiErr(http.StatusNotFound, 40410000, "account not found")
	}
	q := r.hr.URL.Query()
	limit, offset := 0, 0
	for _, p := range []struct {
		name string
		dst  *int
	}{{"limit", &limit}, {"offset", &offset}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return apiErr(http.StatusBadRequest, 40010000, p.name+" must be a non-negative integer")
			}
			*p.dst = n
		}
	}
	dir := q.Get("direction")
	out := []map[string]any{}
	skipped := 0
	for i := len(s.st.Transfers) - 1; i >= 0; i-- {
		t := s.st.Transfers[i]
		if t.AccountID != id || (dir != "" && t.Direction != dir) {
			continue
		}
		if skipped < offset {
			skipped++
			continue
		}
		out = append(out, renderTransfer(t))
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return jsonResponse(http.StatusOK, out)
}

func renderWallet(t *WalletTransfer) map[string]any {
	amt := FormatAmount(t.Amount)
	return map[string]any{
		"id": t.ID, "account_id": t.AccountID, "direction": t.Direction, "status": t.Status,
		"requested_amount": amt, "total_amount": amt, "original_currency": "USD", "payment_type": t.PaymentType,
		"fees": []any{}, "usd": map[string]any{"amount": amt},
		"created_at": t.CreatedAt.Format(time.RFC3339Nano), "updated_at": t.UpdatedAt.Format(time.RFC3339Nano),
	}
}

// newWalletTransfer starts a funding-wallet transfer. Funding-wallet
// transfers publish nothing — no status event, no activity — so a client
// learns their outcome only by polling.
func (s *Server) newWalletTransfer(a *Account, direction string, amount int64, now time.Time) *WalletTransfer {
	t := &WalletTransfer{ID: s.dice.uuid(), AccountID: a.ID, Direction: direction, Status: WalletPending,
		Amount: amount, PaymentType: "local_rails", CreatedAt: now, UpdatedAt: now}
	s.st.Wallet = append(s.st.Wallet, t)
	s.st.wallet[t.ID] = t
	s.dirty = true
	if direction == "outgoing" {
		a.Cash -= amount
	}
	s.schedule(now.Add(s.cfg.SettlementDelay), jobWalletAdvance, t.ID)
	return t
}

// advanceWallet: PENDING → EXECUTED → COMPLETE; an incoming transfer
// credits the account at COMPLETE.
func (s *Server) advanceWallet(t *WalletTransfer, now time.Time) {
	next := ""
	switch t.Status {
	case WalletPending:
		next = WalletExecuted
		s.schedule(now.Add(s.cfg.SettlementDelay), jobWalletAdvance, t.ID)
	case WalletExecuted:
		next = WalletComplete
		if t.Direction == "incoming" {
			s.st.accounts[t.AccountID].Cash += t.Amount
		}
	default:
		return
	}
	if err := WalletTransition(t.Status, next); err != nil {
		panic("brokersim: " + err.Error())
	}
	t.Status, t.UpdatedAt = next, now
	s.dirty = true
}

func (s *Server) createWalletWithdrawal(r *request) response {
	a := s.st.accounts[r.hr.PathValue("account_id")]
	if a == nil || a.Firm {
		return apiErr(http.StatusNotFound, 40410000, "account not found")
	}
	var req struct {
		Amount string `json:"amount"`
	}
	if err := json.Unmarshal(r.body, &req); err != nil {
		return apiErr(http.StatusBadRequest, 40010000, "request body is not valid JSON")
	}
	amount, err := ParseAmount(req.Amount)
	if err != nil {
		return apiErr(http.StatusBadRequest, 40010000, err.Error())
	}
	if a.Cash < amount {
		return apiErr(http.StatusForbidden, 40310000, "insufficient balance for withdrawal")
	}
	return jsonResponse(http.StatusOK, renderWallet(s.newWalletTransfer(a, "outgoing", amount, r.now)))
}

// demoWalletFunding stands for money arriving in a funding wallet from
// outside, as the sandbox's POST /v1beta/demo/banking/funding does. Its
// body ({"account_id", "amount"}) is the simulator's own.
func (s *Server) demoWalletFunding(r *request) response {
	var req struct {
		AccountID string `json:"account_id"`
		Amount    string `json:"amount"`
	}
	if err := json.Unmarshal(r.body, &req); err != nil {
		return apiErr(http.StatusBadRequest, 40010000, "request body is not valid JSON")
	}
	a := s.st.accounts[req.AccountID]
	if a == nil || a.Firm {
		return apiErr(http.StatusNotFound, 40410000, "account not found")
	}
	amount, err := ParseAmount(req.Amount)
	if err != nil {
		return apiErr(http.StatusBadRequest, 40010000, err.Error())
	}
	return jsonResponse(http.StatusOK, renderWallet(s.newWalletTransfer(a, "incoming", amount, r.now)))
}

func (s *Server) listWalletTransfers(r *request) response {
	id := r.hr.PathValue("account_id")
	if s.st.accounts[id] == nil {
		return apiErr(http.StatusNotFound, 40410000, "account not found")
	}
	out := []map[string]any{}
	for i := len(s.st.Wallet) - 1; i >= 0; i-- {
		if t := s.st.Wallet[i]; t.AccountID == id {
			out = append(out, renderWallet(t))
		}
	}
	return jsonResponse(http.StatusOK, out)
}

func (s *Server) getWalletTransfer(r *request) response {
	t := s.st.wallet[r.hr.PathValue("transfer_id")]
	if t == nil || t.AccountID != r.hr.PathValue("account_id") {
		return apiErr(http.StatusNotFound, 40410000, "transfer not found")
	}
	return jsonResponse(http.StatusOK, renderWallet(t))
}
