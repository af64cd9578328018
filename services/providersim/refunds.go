package providersim

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// createRefund handles POST /v1/refunds for a payment_intent (or its
// charge). Only succeeded payments can be refunded, by at most what is left;
// a refund succeeds at once. The PaymentIntent keeps status "succeeded", as
// on Stripe: the refund shows on its charge (amount_refunded, refunded) and
// as refund.created and charge.refunded events.
func (s *Server) createRefund(r *request) response {
	if e := r.form.only("payment_intent", "charge", "amount", "reason", "metadata[", "expand[", "expand"); e != nil {
		return e.response()
	}
	var pi *paymentIntent
	if id, ok := r.form.get("payment_intent"); ok && id != "" {
		if pi, ok = s.st.piByID[id]; !ok {
			return invalidRequest("resource_missing", "payment_intent", "No such payment_intent: '"+id+"'").response()
		}
	} else if ch, ok := r.form.get("charge"); ok && ch != "" {
		pi = s.st.piByID["pi_"+strings.TrimPrefix(ch, "ch_")]
		if pi == nil || pi.ChargeID != ch {
			return invalidRequest("resource_missing", "charge", "No such charge: '"+ch+"'").response()
		}
	} else {
		return invalidRequest("parameter_missing", "payment_intent", "One of the following params should be provided for this request: payment_intent or charge.").response()
	}
	if pi.Status != StatusSucceeded {
		return invalidRequest("payment_intent_unexpected_state", "payment_intent",
			fmt.Sprintf("This PaymentIntent (%s) does not have a successful charge to refund.", pi.ID)).response()
	}
	left := pi.received() - pi.AmountRefunded
	amount := left
	if n, ok, e := r.form.int("amount"); e != nil {
		return e.response()
	} else if ok {
		if n < 1 {
			return invalidRequest("parameter_invalid_integer", "amount", "This value must be greater than or equal to 1.").response()
		}
		amount = n
	}
	if left == 0 {
		return invalidRequest("charge_already_refunded", "", fmt.Sprintf("Charge %s has already been refunded.", pi.ChargeID)).response()
	}
	if amount > left {
		return invalidRequest("amount_too_large", "amount",
			fmt.Sprintf("Refund amount (%d) is greater than unrefunded amount on charge (%d)", amount, left)).response()
	}
	reason, _ := r.form.get("reason")
	switch reason {
	case "", "duplicate", "fraudulent", "requested_by_customer":
	default:
		return invalidRequest("", "reason", "Invalid reason: "+reason).response()
	}
	md, e := r.form.metadata()
	if e != nil {
		return e.response()
	}
	rf := s.refund(r, pi, amount, reason, md, r.now)
	return jsonResponse(http.StatusOK, renderRefund(rf))
}

// refund records a refund of amount on pi and emits its events. r is nil
// when the provider refunds by itself. Called with s.mu held.
func (s *Server) refund(r *request, pi *paymentIntent, amount int64, reason string, md map[string]string, now time.Time) *refund {
	if md == nil {
		md = map[string]string{}
	}
	rf := &refund{Seq: s.st.nextSeq(), ID: s.dice.id("re"), Amount: amount, Currency: pi.Currency,
		PaymentIntent: pi.ID, Charge: pi.ChargeID, Status: "succeeded", Reason: reason, Created: now.Unix(), Metadata: md}
	prevRefunded := pi.AmountRefunded
	pi.AmountRefunded += amount
	s.st.Refunds = append(s.st.Refunds, rf)
	s.st.refundByID[rf.ID] = rf
	s.dirty = true
	s.emit(r, "refund.created", renderRefund(rf), nil)
	s.emit(r, "charge.refunded", s.renderCharge(pi), map[string]any{"amount_refunded": prevRefunded, "refunded": false})
	return rf
}

// retrieveRefund handles GET /v1/refunds/{id}.
func (s *Server) retrieveRefund(r *request) response {
	if e := r.form.only("expand[", "expand"); e != nil {
		return e.response()
	}
	rf, ok := s.st.refundByID[r.pathID]
	if !ok {
		return notFound("refund", "refund", r.pathID).response()
	}
	return jsonResponse(http.StatusOK, renderRefund(rf))
}

// listRefunds handles GET /v1/refunds, optionally for one payment_intent.
func (s *Server) listRefunds(r *request) response {
	if e := r.form.only("limit", "starting_after", "ending_before", "created", "created[", "payment_intent", "charge", "expand[", "expand"); e != nil {
		return e.response()
	}
	w, e := readListWindow(r.form)
	if e != nil {
		return e.response()
	}
	piID, _ := r.form.get("payment_intent")
	chID, _ := r.form.get("charge")
	out, e := paginate(s.st.Refunds, w,
		func(x *refund) int64 { return x.Seq }, func(x *refund) int64 { return x.Created },
		func(x *refund) bool {
			return (piID == "" || x.PaymentIntent == piID) && (chID == "" || x.Charge == chID)
		},
		func(id string) (int64, bool) {
			x, ok := s.st.refundByID[id]
			if !ok {
				return 0, false
			}
			return x.Seq, true
		},
		func(x *refund) any { return renderRefund(x) }, "/v1/refunds")
	if e != nil {
		return e.response()
	}
	return jsonResponse(http.StatusOK, out)
}

type refundJSON struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Charge        string            `json:"charge"`
	Created       int64             `json:"created"`
	Currency      string            `json:"currency"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent string            `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	Status        string            `json:"status"`
}

func renderRefund(rf *refund) refundJSON {
	md := rf.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return refundJSON{ID: rf.ID, Object: "refund", Amount: rf.Amount, Charge: rf.Charge, Created: rf.Created,
		Currency: rf.Currency, Metadata: md, PaymentIntent: rf.PaymentIntent, Reason: strPtr(rf.Reason), Status: rf.Status}
}
