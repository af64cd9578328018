package brokersim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxIdempotencyKey is the documented maximum length of Idempotency-Key.
const maxIdempotencyKey = 128

type journalRequest struct {
	EntryType   string `json:"entry_type"`
	FromAccount string `json:"from_account"`
	ToAccount   string `json:"to_account"`
	Amount      string `json:"amount"`
	Description string `json:"description"`
	Currency    string `json:"currency"`
}

func renderJournal(j *Journal) map[string]any {
	out := map[string]any{
		"id": j.ID, "entry_type": j.EntryType, "from_account": j.FromAccount, "to_account": j.ToAccount,
		"status": j.Status, "symbol": nil, "qty": nil, "price": nil, "net_amount": FormatAmount(j.Amount),
		"settle_date": nil, "system_date": nil, "description": j.Description, "currency": j.Currency,
		"created_at": j.CreatedAt.Format(time.RFC3339Nano),
	}
	if !j.ExecutedAt.IsZero() {
		out["settle_date"] = j.ExecutedAt.Format(time.DateOnly)
		out["system_date"] = j.ExecutedAt.Format(time.DateOnly)
	}
	return out
}

// createJournal is POST /v1/journals for cash journals. With an
// Idempotency-Key, the same key and body answer the journal the first call
// created (as it is now), another body 422; a request that fails is not
// remembered, so it can be retried with the same key.
func (s *Server) createJournal(r *request) response {
	key := strings.TrimSpace(r.hr.Header.Get("Idempotency-Key"))
	if len(key) > maxIdempotencyKey {
		return apiErr(http.StatusBadRequest, 40010000, "Idempotency-Key is longer than 128 characters")
	}
	fp := RequestFingerprint(r.body)
	if key != "" {
		rec := s.st.Idempotency[key]
		switch DecideIdempotency(rec.Fingerprint, fp) {
		case IdemReplay:
			s.stats.IdempotentReplays++
			return jsonResponse(http.StatusOK, renderJournal(s.st.journals[rec.JournalID]))
		case IdemConflict:
			s.stats.IdempotencyClash++
			return apiErr(http.StatusUnprocessableEntity, 42210000, "Idempotency-Key was used with a different request")
		}
	}
	var req journalRequest
	if err := json.Unmarshal(r.body, &req); err != nil {
		return apiErr(http.StatusBadRequest, 40010000, "request body is not valid JSON")
	}
	if req.EntryType != "JNLC" {
		return apiErr(http.StatusUnprocessableEntity, 42210000, "entry_type must be JNLC (broker-sim does not simulate JNLS)")
	}
	amount, err := ParseAmount(req.Amount)
	if err != nil {
		return apiErr(http.StatusBadRequest, 40010000, err.Error())
	}
	if req.Currency != "" && req.Currency != "USD" {
		return apiErr(http.StatusUnprocessableEntity, 42210000, "currency must be USD")
	}
	from, to := s.st.accounts[req.FromAccount], s.st.accounts[req.ToAccount]
	if from == nil || to == nil {
		return apiErr(http.StatusNotFound, 40410000, "account not found")
	}
	if from.Firm == to.Firm {
		return apiErr(http.StatusUnprocessableEntity, 42210000, "a cash journal moves cash between the firm account and a customer account")
	}
	if from.Cash < amount {
		return apiErr(http.StatusForbidden, 40310000, "amount requested to move is not available")
	}
	j := &Journal{ID: s.dice.uuid(), EntryType: "JNLC", FromAccount: from.ID, ToAccount: to.ID,
		Amount: amount, Description: req.Description, Currency: "USD", CreatedAt: r.now, IdempotencyKey: key}
	s.st.Journals = append(s.st.Journals, j)
	s.st.journals[j.ID] = j
	s.dirty = true
	if key != "" {
		s.st.Idempotency[key] = idemRecord{Fingerprint: fp, JournalID: j.ID}
	}
	if s.dice.Chance(streamSlow, s.faults.SlowSettlementRate) {
		s.stats.SlowSettlements++
		s.setJournalStatus(j, JournalQueued, r.now)
		s.schedule(r.now.Add(s.faults.SlowSettlementDelay), jobJournalExecute, j.ID)
	} else {
		// JNLC v2: a single cash journal usually answers executed.
		s.executeJournal(j, r.now, false)
	}
	return jsonResponse(http.StatusOK, renderJournal(j))
}

// setJournalStatus moves a journal and records the status event; called
// with s.mu held.
func (s *Server) setJournalStatus(j *Journal, to string, now time.Time) {
	if err := JournalTransition(j.Status, to); err != nil {
		panic("brokersim: " + err.Error()) // the simulator's own moves are always allowed ones
	}
	from := j.Status
	j.Status = to
	s.dirty = true
	// Ordered by the customer's account: the firm account is on every
	// journal, and keeping its order would keep the whole stream in order.
	customer := j.ToAccount
	if s.st.accounts[customer].Firm {
		customer = j.FromAccount
	}
	s.appendEvent(&s.st.JournalLog, now, []string{customer}, func(id string) map[string]any {
		ev := map[string]any{"at": now.Format(time.RFC3339Nano), "entry_type": j.EntryType, "event_id": id,
			"journal_id": j.ID, "status_from": from, "status_to": to, "description": j.Description}
		if j.IdempotencyKey != "" {
			ev["idempotency_key"] = j.IdempotencyKey
			ev["idempotency_key_type"] = "single"
		}
		return ev
	})
}

// executeJournal moves the cash, marks the journal executed and publishes
// one JNLC activity per account. A journal that no longer fits the balance
// is refused, unless force (a correction) says it is booked anyway.
func (s *Server) executeJournal(j *Journal, now time.Time, force bool) {
	from, to := s.st.accounts[j.FromAccount], s.st.accounts[j.ToAccount]
	if from.Cash < j.Amount && !force {
		s.setJournalStatus(j, JournalRefused, now)
		return
	}
	from.Cash -= j.Amount
	to.Cash += j.Amount
	j.ExecutedAt = now
	s.setJournalStatus(j, JournalExecuted, now)
	j.Activities = map[string]string{}
	var prev map[string]string
	if old := s.st.journals[j.Corrects]; old != nil {
		prev = old.Activities
	}
	for _, side := range []struct {
		acct  string
		cents int64
	}{{j.FromAccount, -j.Amount}, {j.ToAccount, j.Amount}} {
		j.Activities[side.acct] = s.activity(side.acct, "JNLC", "", side.cents, now, prev[side.acct],
			map[string]any{"journal_id": j.ID}, j.Description)
	}
	if s.dice.Chance(streamCorrection, s.faults.CorrectionRate) {
		s.schedule(now.Add(s.faults.CorrectionDelay), jobJournalCorrect, j.ID)
	}
}

// correctJournal is Alpaca's correction: the executed journal moves to
// correct (its cash goes back) and a new journal with the corrected amount
// is executed under a new id. The new journal's activities name the old
// ones as previous_id.
func (s *Server) correctJournal(old *Journal, amount int64, now time.Time) *Journal {
	from, to := s.st.accounts[old.FromAccount], s.st.accounts[old.ToAccount]
	from.Cash += old.Amount
	to.Cash -= old.Amount
	s.setJournalStatus(old, JournalCorrect, now)
	j := &Journal{ID: s.dice.uuid(), EntryType: old.EntryType, FromAccount: old.FromAccount, ToAccount: old.ToAccount,
		Amount: amount, Description: old.Description, Currency: old.Currency, CreatedAt: now, Corrects: old.ID}
	old.CorrectedBy = j.ID
	s.st.Journals = append(s.st.Journals, j)
	s.st.journals[j.ID] = j
	s.stats.Corrections++
	// A correction is booked whatever the balance: it fixes what happened.
	s.executeJournal(j, now, true)
	return j
}

// activity publishes one activity on the activities stream and returns its
// ref_id, the stream's dedupe key; called with s.mu held.
func (s *Server) activity(account, typ, subtype string, cents int64, at time.Time, previous string, details map[string]any, desc string) string {
	ref := s.dice.uuid()
	s.appendEvent(&s.st.ActivityLog, at, []string{account}, func(id string) map[string]any {
		ev := map[string]any{"account_id": account, "at": at.Format(time.RFC3339Nano), "event_id": id,
			"activity_type": typ, "executed_at": at.Format(time.RFC3339Nano), "status": "executed",
			"settle_date": at.Format(time.DateOnly), "currency": "USD", "ref_id": ref,
			"net_amount": FormatAmount(cents), "qty": nil, "price": nil, "description": desc}
		if subtype != "" {
			ev["activity_subtype"] = subtype
		}
		if previous != "" {
			ev["previous_id"] = previous
		}
		if details != nil {
			ev["details"] = details
		}
		return ev
	})
	return ref
}

// listJournals is GET /v1/journals, oldest first (Alpaca leaves the order
// undocumented). after and before compare the creation date, both
// exclusive.
func (s *Server) listJournals(r *request) response {
	q := r.hr.URL.Query()
	var after, before string
	for _, p := range []struct {
		name string
		dst  *string
	}{{"after", &after}, {"before", &before}} {
		if v := q.Get(p.name); v != "" {
			if _, err := time.Parse(time.DateOnly, v); err != nil {
				return apiErr(http.StatusBadRequest, 40010000, p.name+" must be YYYY-MM-DD")
			}
			*p.dst = v
		}
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return apiErr(http.StatusBadRequest, 40010000, "limit must be a positive integer")
		}
		limit = n
	}
	out := []map[string]any{}
	for _, j := range s.st.Journals {
		d := j.CreatedAt.Format(time.DateOnly)
		switch {
		case after != "" && d <= after, before != "" && d >= before,
			q.Get("status") != "" && j.Status != q.Get("status"),
			q.Get("entry_type") != "" && j.EntryType != q.Get("entry_type"),
			q.Get("to_account") != "" && j.ToAccount != q.Get("to_account"),
			q.Get("from_account") != "" && j.FromAccount != q.Get("from_account"):
			continue
		}
		out = append(out, renderJournal(j))
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return jsonResponse(http.StatusOK, out)
}

func (s *Server) getJournal(r *request) response {
	j := s.st.journals[r.hr.PathValue("journal_id")]
	if j == nil {
		return apiErr(http.StatusNotFound, 40410000, "journal not found")
	}
	return jsonResponse(http.StatusOK, renderJournal(j))
}

// deleteJournal is DELETE /v1/journals/{journal_id}: a queued or pending
// journal is canceled (204); any other is refused with the error Alpaca
// documents. An executed journal is undone only by a journal the other way.
func (s *Server) deleteJournal(r *request) response {
	j := s.st.journals[r.hr.PathValue("journal_id")]
	if j == nil {
		return apiErr(http.StatusNotFound, 40410000, "journal not found")
	}
	if j.Status != JournalQueued && j.Status != JournalPending {
		return apiErr(http.StatusUnprocessableEntity, 42210000, "The journal is not pending or queued.")
	}
	s.setJournalStatus(j, JournalCanceled, r.now)
	return response{status: http.StatusNoContent}
}
