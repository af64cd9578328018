package providersim

import (
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"
)

// captureManual is the capture_method of an authorization hold.
const captureManual = "manual"

// cancellationAutomatic is the cancellation_reason Stripe gives a
// PaymentIntent it canceled by itself, as when a hold expires.
const cancellationAutomatic = "automatic"

// authorize puts a hold on the card of a manual-capture PaymentIntent: the
// charge exists but is not captured, the intent waits in requires_capture
// with amount_capturable set, and the hold expires after
// Config.HoldExpiry. Stripe announces it with charge.succeeded (captured
// false) and payment_intent.amount_capturable_updated. Called with s.mu
// held.
func (s *Server) authorize(r *request, pi *paymentIntent) {
	prev := pi.Status
	pi.Status = StatusRequiresCapture
	pi.ChargeID = "ch_" + strings.TrimPrefix(pi.ID, "pi_")
	pi.ChargeCreated = r.now.Unix()
	s.dirty = true
	s.schedule(job{At: r.now.Add(s.cfg.HoldExpiry), Kind: jobHoldExpiry, Object: pi.ID})
	s.emit(r, "charge.succeeded", s.renderCharge(pi), nil)
	s.emit(r, "payment_intent.amount_capturable_updated", s.renderPI(pi, false),
		map[string]any{"status": prev, "amount_capturable": 0})
}

// capturePaymentIntent handles POST /v1/payment_intents/{id}/capture: the
// whole hold, or amount_to_capture of it (the rest is released). Only an
// intent in requires_capture can be captured; one whose hold expired is
// refused with charge_expired_for_capture, as Stripe refuses it.
func (s *Server) capturePaymentIntent(r *request) response {
	if e := r.form.only("amount_to_capture", "metadata[", "expand[", "expand", "final_capture"); e != nil {
		return e.response()
	}
	pi, ok := s.st.piByID[r.pathID]
	if !ok {
		return notFound("intent", "payment_intent", r.pathID).response()
	}
	if pi.Status == StatusCanceled && pi.manual() && pi.CancellationReason == cancellationAutomatic {
		e := invalidRequest("charge_expired_for_capture", "",
			"The charge cannot be captured as the authorization has expired. Auth and capture charges must be captured within a set number of days.")
		e.PaymentIntent = mustJSON(s.renderPI(pi, false))
		return e.response()
	}
	if pi.Status != StatusRequiresCapture {
		e := unexpectedState(fmt.Sprintf("This PaymentIntent could not be captured because it has a status of %s. "+
			"Only a PaymentIntent with one of the following statuses may be captured: requires_capture.", pi.Status))
		e.PaymentIntent = mustJSON(s.renderPI(pi, false))
		return e.response()
	}
	if final, e := r.form.bool("final_capture"); e != nil {
		return e.response()
	} else if _, given := r.form.get("final_capture"); given && !final {
		return invalidRequest("", "final_capture", "Multicapture is not supported by provider-sim: final_capture must be true.").response()
	}
	amount := pi.Amount
	if n, ok, e := r.form.int("amount_to_capture"); e != nil {
		return e.response()
	} else if ok {
		if n < 1 {
			return invalidRequest("parameter_invalid_integer", "amount_to_capture", "This value must be greater than or equal to 1.").response()
		}
		if n > pi.Amount {
			return invalidRequest("amount_too_large", "amount_to_capture",
				fmt.Sprintf("The amount to capture (%d) must be less than or equal to the amount capturable (%d).", n, pi.Amount)).response()
		}
		amount = n
	}
	md, e := r.form.metadata()
	if e != nil {
		return e.response()
	}
	if len(md) > 0 {
		// A new map: snapshots share the old one while they encode it.
		merged := maps.Clone(pi.Metadata)
		if merged == nil {
			merged = map[string]string{}
		}
		maps.Copy(merged, md)
		pi.Metadata = merged
	}
	prev := pi.Status
	pi.Status = StatusSucceeded
	pi.AmountCaptured = amount
	s.dirty = true
	s.emit(r, "charge.captured", s.renderCharge(pi), map[string]any{"captured": false, "amount_captured": 0})
	s.emit(r, "payment_intent.succeeded", s.renderPI(pi, false),
		map[string]any{"status": prev, "amount_capturable": pi.Amount, "amount_received": 0})
	if s.dice.Chance(streamLateReversal, s.faults.LateReversalRate) {
		s.schedule(job{At: r.now.Add(s.faults.LateReversalDelay), Kind: jobLateReversal, Object: pi.ID})
	}
	return jsonResponse(http.StatusOK, s.renderPI(pi, r.form.expands("latest_charge")))
}

// expireHold cancels a hold nobody captured in time, releasing it, as
// Stripe does with charge.expired and payment_intent.canceled. Called with
// s.mu held.
func (s *Server) expireHold(pi *paymentIntent, now time.Time) {
	pi.Status = StatusCanceled
	pi.CanceledAt = now.Unix()
	pi.CancellationReason = cancellationAutomatic
	s.dirty = true
	s.emit(nil, "charge.expired", s.renderCharge(pi), nil)
	s.emit(nil, "payment_intent.canceled", s.renderPI(pi, false),
		map[string]any{"status": StatusRequiresCapture, "amount_capturable": pi.Amount})
}
