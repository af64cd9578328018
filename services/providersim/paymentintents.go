package providersim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// PaymentIntent statuses, as on Stripe.
const (
	StatusRequiresPaymentMethod = "requires_payment_method"
	StatusRequiresConfirmation  = "requires_confirmation"
	StatusRequiresAction        = "requires_action"
	StatusProcessing            = "processing"
	StatusRequiresCapture       = "requires_capture"
	StatusCanceled              = "canceled"
	StatusSucceeded             = "succeeded"
)

// Test payment methods. Stripe's test ids behave as on Stripe;
// PaymentMethodProcessing is the simulator's own: the payment stays
// processing for Faults.ProcessingDelay, then succeeds.
const (
	PaymentMethodVisa              = "pm_card_visa"
	PaymentMethodMastercard        = "pm_card_mastercard"
	PaymentMethodDeclined          = "pm_card_chargeDeclined"
	PaymentMethodInsufficientFunds = "pm_card_chargeDeclinedInsufficientFunds"
	PaymentMethodProcessing        = "pm_card_processing"
)

// declineCodes maps declining test methods to their decline_code.
var declineCodes = map[string]string{
	PaymentMethodDeclined:          "generic_decline",
	PaymentMethodInsufficientFunds: "insufficient_funds",
}

func knownPaymentMethod(pm string) bool {
	switch pm {
	case PaymentMethodVisa, PaymentMethodMastercard, PaymentMethodProcessing:
		return true
	}
	_, ok := declineCodes[pm]
	return ok
}

// currencies Stripe settles in that the simulator accepts (lower case).
var currencies = map[string]bool{
	"usd": true, "eur": true, "gbp": true, "jpy": true, "chf": true, "cad": true, "aud": true,
	"nzd": true, "sek": true, "nok": true, "dkk": true, "pln": true, "czk": true, "huf": true,
	"sgd": true, "hkd": true, "mxn": true, "brl": true, "inr": true,
}

// maxAmount is Stripe's largest amount (eight digits).
const maxAmount = 99999999

// createPaymentIntent handles POST /v1/payment_intents. Invalid parameters
// are a 400 and create nothing. With confirm=true a decline is a 402
// card_error carrying the (created) PaymentIntent, as on Stripe.
func (s *Server) createPaymentIntent(r *request) response {
	if e := r.form.only("amount", "currency", "confirm", "payment_method", "description", "metadata[",
		"expand[", "expand", "payment_method_types[", "capture_method", "confirmation_method"); e != nil {
		return e.response()
	}
	amount, ok, e := r.form.int("amount")
	if e != nil {
		return e.response()
	}
	if !ok {
		return missingParam("amount").response()
	}
	if amount < 1 {
		return invalidRequest("parameter_invalid_integer", "amount", "This value must be greater than or equal to 1.").response()
	}
	if amount > maxAmount {
		return invalidRequest("amount_too_large", "amount", "Amount must be no more than 99999999.").response()
	}
	currency, ok := r.form.get("currency")
	if !ok || currency == "" {
		return missingParam("currency").response()
	}
	if !currencies[strings.ToLower(currency)] {
		return invalidRequest("parameter_invalid_string", "currency", "Invalid currency: "+currency+".").response()
	}
	pm, _ := r.form.get("payment_method")
	if pm != "" && !knownPaymentMethod(pm) {
		return invalidRequest("resource_missing", "payment_method", "No such PaymentMethod: '"+pm+"'").response()
	}
	captureMethod, _ := r.form.get("capture_method")
	switch captureMethod {
	case "", "automatic", "automatic_async":
		captureMethod = ""
	case captureManual:
	default:
		return invalidRequest("", "capture_method", "Invalid capture_method: must be one of automatic, automatic_async, or manual").response()
	}
	confirm, e := r.form.bool("confirm")
	if e != nil {
		return e.response()
	}
	if confirm && pm == "" {
		return missingParam("payment_method").response()
	}
	md, e := r.form.metadata()
	if e != nil {
		return e.response()
	}
	desc, _ := r.form.get("description")
	id := s.dice.id("pi")
	for s.st.piByID[id] != nil { // cannot happen with a restored snapshot; never reuse an id
		id = s.dice.id("pi")
	}
	pi := &paymentIntent{
		Seq: s.st.nextSeq(), ID: id, Amount: amount, Currency: strings.ToLower(currency),
		Status: StatusRequiresPaymentMethod, Created: r.now.Unix(), Description: desc, Metadata: md,
		PaymentMethod: pm, ClientSecret: id + "_secret_" + strings.TrimPrefix(s.dice.id("cs"), "cs_"),
		CaptureMethod: captureMethod,
	}
	if pm != "" {
		pi.Status = StatusRequiresConfirmation
	}
	s.st.PaymentIntents = append(s.st.PaymentIntents, pi)
	s.st.piByID[id] = pi
	s.dirty = true
	s.emit(r, "payment_intent.created", s.renderPI(pi, false), nil)
	if confirm {
		return s.confirm(r, pi)
	}
	return jsonResponse(http.StatusOK, s.renderPI(pi, r.form.expands("latest_charge")))
}

// confirmPaymentIntent handles POST /v1/payment_intents/{id}/confirm.
func (s *Server) confirmPaymentIntent(r *request) response {
	if e := r.form.only("payment_method", "expand[", "expand", "return_url"); e != nil {
		return e.response()
	}
	pi, ok := s.st.piByID[r.pathID]
	if !ok {
		return notFound("intent", "payment_intent", r.pathID).response()
	}
	if pm, ok := r.form.get("payment_method"); ok {
		if !knownPaymentMethod(pm) {
			return invalidRequest("resource_missing", "payment_method", "No such PaymentMethod: '"+pm+"'").response()
		}
		if pi.Status != StatusRequiresPaymentMethod && pi.Status != StatusRequiresConfirmation {
			return s.unexpected(pi, "confirm").response()
		}
		pi.PaymentMethod = pm
	}
	if pi.PaymentMethod == "" {
		return missingParam("payment_method").response()
	}
	return s.confirm(r, pi)
}

func (s *Server) unexpected(pi *paymentIntent, verb string) *apiError {
	e := unexpectedState(fmt.Sprintf("You cannot %s this PaymentIntent because it has a status of %s.", verb, pi.Status))
	e.PaymentIntent = mustJSON(s.renderPI(pi, false))
	return e
}

// confirm moves a PaymentIntent through confirmation with its payment
// method: succeeding cards succeed (or stay processing, per the
// processing-rate knob), declining cards return it to
// requires_payment_method with last_payment_error and answer 402.
// Called with s.mu held.
func (s *Server) confirm(r *request, pi *paymentIntent) response {
	if pi.Status != StatusRequiresPaymentMethod && pi.Status != StatusRequiresConfirmation {
		return s.unexpected(pi, "confirm").response()
	}
	prev := pi.Status
	s.dirty = true
	if code, declined := declineCodes[pi.PaymentMethod]; declined {
		pi.Status = StatusRequiresPaymentMethod
		pi.LastPaymentError = &apiError{Type: errTypeCard, Code: "card_declined", DeclineCode: code,
			Message: declineMessage(code)}
		obj := s.renderPI(pi, false)
		s.emit(r, "payment_intent.payment_failed", obj, map[string]any{"status": prev, "last_payment_error": nil})
		e := &apiError{Status: http.StatusPaymentRequired, Type: errTypeCard, Code: "card_declined",
			DeclineCode: code, Message: declineMessage(code), PaymentIntent: mustJSON(obj)}
		return e.response()
	}
	pi.LastPaymentError = nil
	if pi.manual() {
		s.authorize(r, pi)
		return jsonResponse(http.StatusOK, s.renderPI(pi, r.form.expands("latest_charge")))
	}
	hold := pi.PaymentMethod == PaymentMethodProcessing || s.dice.Chance(streamProcessing, s.faults.ProcessingRate)
	if hold {
		pi.Status = StatusProcessing
		s.stats.ProcessingHeld++
		s.schedule(job{At: r.now.Add(s.faults.ProcessingDelay), Kind: jobResolveProcessing, Object: pi.ID})
		s.emit(r, "payment_intent.processing", s.renderPI(pi, false), map[string]any{"status": prev})
	} else {
		s.succeed(r, pi, r.now)
	}
	return jsonResponse(http.StatusOK, s.renderPI(pi, r.form.expands("latest_charge")))
}

func declineMessage(code string) string {
	if code == "insufficient_funds" {
		return "Your card has insufficient funds."
	}
	return "Your card was declined."
}

// succeed charges the payment and may schedule a late reversal. r is nil
// when the provider acts by itself. Called with s.mu held.
func (s *Server) succeed(r *request, pi *paymentIntent, now time.Time) {
	prev := pi.Status
	pi.Status = StatusSucceeded
	pi.ChargeID = "ch_" + strings.TrimPrefix(pi.ID, "pi_")
	pi.ChargeCreated = now.Unix()
	s.dirty = true
	s.emit(r, "charge.succeeded", s.renderCharge(pi), nil)
	s.emit(r, "payment_intent.succeeded", s.renderPI(pi, false), map[string]any{"status": prev})
	if s.dice.Chance(streamLateReversal, s.faults.LateReversalRate) {
		s.schedule(job{At: now.Add(s.faults.LateReversalDelay), Kind: jobLateReversal, Object: pi.ID})
	}
}

// cancelPaymentIntent handles POST /v1/payment_intents/{id}/cancel. Only
// payments not yet processing or final can be canceled.
func (s *Server) cancelPaymentIntent(r *request) response {
	if e := r.form.only("cancellation_reason", "expand[", "expand"); e != nil {
		return e.response()
	}
	pi, ok := s.st.piByID[r.pathID]
	if !ok {
		return notFound("intent", "payment_intent", r.pathID).response()
	}
	reason, _ := r.form.get("cancellation_reason")
	switch reason {
	case "", "duplicate", "fraudulent", "requested_by_customer", "abandoned":
	default:
		return invalidRequest("", "cancellation_reason", "Invalid cancellation_reason: "+reason).response()
	}
	switch pi.Status {
	case StatusRequiresPaymentMethod, StatusRequiresConfirmation, StatusRequiresAction, StatusRequiresCapture:
	default:
		return s.unexpected(pi, "cancel").response()
	}
	prev := pi.Status
	pi.Status = StatusCanceled
	pi.CanceledAt = r.now.Unix()
	pi.CancellationReason = reason
	s.dirty = true
	if prev == StatusRequiresCapture { // the authorization is released
		s.emit(r, "charge.refunded", s.renderCharge(pi), map[string]any{"amount_refunded": 0, "refunded": false})
		s.emit(r, "payment_intent.canceled", s.renderPI(pi, false), map[string]any{"status": prev, "amount_capturable": pi.Amount})
	} else {
		s.emit(r, "payment_intent.canceled", s.renderPI(pi, false), map[string]any{"status": prev})
	}
	return jsonResponse(http.StatusOK, s.renderPI(pi, r.form.expands("latest_charge")))
}

// retrievePaymentIntent handles GET /v1/payment_intents/{id}; an unknown id
// is a 404 resource_missing.
func (s *Server) retrievePaymentIntent(r *request) response {
	if e := r.form.only("expand[", "expand", "client_secret"); e != nil {
		return e.response()
	}
	pi, ok := s.st.piByID[r.pathID]
	if !ok {
		return notFound("intent", "payment_intent", r.pathID).response()
	}
	return jsonResponse(http.StatusOK, s.renderPI(pi, r.form.expands("latest_charge")))
}

// listPaymentIntents handles GET /v1/payment_intents with created[…],
// limit, starting_after and ending_before; see paginate for the order.
func (s *Server) listPaymentIntents(r *request) response {
	if e := r.form.only("limit", "starting_after", "ending_before", "created", "created[", "expand[", "expand", "customer"); e != nil {
		return e.response()
	}
	w, e := readListWindow(r.form)
	if e != nil {
		return e.response()
	}
	expandCharge := r.form.expands("data.latest_charge")
	out, e := paginate(s.st.PaymentIntents, w,
		func(p *paymentIntent) int64 { return p.Seq }, func(p *paymentIntent) int64 { return p.Created }, nil,
		func(id string) (int64, bool) {
			p, ok := s.st.piByID[id]
			if !ok {
				return 0, false
			}
			return p.Seq, true
		},
		func(p *paymentIntent) any { return s.renderPI(p, expandCharge) }, "/v1/payment_intents")
	if e != nil {
		return e.response()
	}
	return jsonResponse(http.StatusOK, out)
}

type piJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CanceledAt         *int64            `json:"canceled_at"`
	CancellationReason *string           `json:"cancellation_reason"`
	CaptureMethod      string            `json:"capture_method"`
	ClientSecret       string            `json:"client_secret"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Description        *string           `json:"description"`
	LastPaymentError   *apiError         `json:"last_payment_error"`
	LatestCharge       any               `json:"latest_charge"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	PaymentMethod      *string           `json:"payment_method"`
	PaymentMethodTypes []string          `json:"payment_method_types"`
	Status             string            `json:"status"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// renderPI is the PaymentIntent as Stripe shows it. latest_charge is the
// charge id, or the charge object (with amount_refunded) when expanded.
func (s *Server) renderPI(pi *paymentIntent, expandCharge bool) piJSON {
	out := piJSON{
		ID: pi.ID, Object: "payment_intent", Amount: pi.Amount, CaptureMethod: "automatic_async",
		ClientSecret: pi.ClientSecret, ConfirmationMethod: "automatic", Created: pi.Created,
		Currency: pi.Currency, Description: strPtr(pi.Description), LastPaymentError: pi.LastPaymentError,
		Metadata: pi.Metadata, PaymentMethod: strPtr(pi.PaymentMethod), PaymentMethodTypes: []string{"card"},
		Status: pi.Status, CancellationReason: strPtr(pi.CancellationReason),
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if pi.CanceledAt != 0 {
		out.CanceledAt = &pi.CanceledAt
	}
	out.AmountReceived = pi.received()
	if pi.Status == StatusRequiresCapture {
		out.AmountCapturable = pi.Amount
	}
	if pi.manual() {
		out.CaptureMethod = captureManual
	}
	if pi.ChargeID != "" {
		if expandCharge {
			out.LatestCharge = s.renderCharge(pi)
		} else {
			out.LatestCharge = pi.ChargeID
		}
	}
	return out
}

type chargeJSON struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	AmountCaptured int64             `json:"amount_captured"`
	AmountRefunded int64             `json:"amount_refunded"`
	Captured       bool              `json:"captured"`
	Created        int64             `json:"created"`
	Currency       string            `json:"currency"`
	Livemode       bool              `json:"livemode"`
	Metadata       map[string]string `json:"metadata"`
	Paid           bool              `json:"paid"`
	PaymentIntent  string            `json:"payment_intent"`
	PaymentMethod  string            `json:"payment_method"`
	Refunded       bool              `json:"refunded"`
	Status         string            `json:"status"`
}

func (s *Server) renderCharge(pi *paymentIntent) chargeJSON {
	md := pi.Metadata
	if md == nil {
		md = map[string]string{}
	}
	// An uncaptured hold's charge is authorized but not captured; what a
	// partial capture, a cancel or an expiry released counts as refunded,
	// as on Stripe.
	refunded := pi.AmountRefunded + pi.released()
	return chargeJSON{ID: pi.ChargeID, Object: "charge", Amount: pi.Amount, AmountCaptured: pi.received(),
		AmountRefunded: refunded, Captured: pi.Status == StatusSucceeded, Created: pi.ChargeCreated, Currency: pi.Currency,
		Metadata: md, Paid: true, PaymentIntent: pi.ID, PaymentMethod: pi.PaymentMethod,
		Refunded: refunded >= pi.Amount, Status: "succeeded"}
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("providersim: rendering %T: %v", v, err)) // only plain structs are rendered
	}
	return b
}
