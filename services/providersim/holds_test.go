package providersim_test

import (
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

// authorize places a hold of amount with key as its Idempotency-Key.
func (h *harness) authorize(sc *stripe.Client, amount int64, key string) *stripe.PaymentIntent {
	h.t.Helper()
	p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(amount), Currency: stripe.String("eur"),
		PaymentMethod: stripe.String(providersim.PaymentMethodVisa), Confirm: stripe.Bool(true),
		CaptureMethod: stripe.String(string(stripe.PaymentIntentCaptureMethodManual))}
	p.SetIdempotencyKey(key)
	pi, err := sc.V1PaymentIntents.Create(h.t.Context(), p)
	if err != nil {
		h.t.Fatalf("authorizing %d (key %s): %v", amount, key, err)
	}
	return pi
}

func capture(t *testing.T, sc *stripe.Client, id string, amount int64, key string) (*stripe.PaymentIntent, error) {
	p := &stripe.PaymentIntentCaptureParams{}
	if amount > 0 {
		p.AmountToCapture = stripe.Int64(amount)
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return sc.V1PaymentIntents.Capture(t.Context(), id, p)
}

func withCharge(t *testing.T, sc *stripe.Client, id string) *stripe.PaymentIntent {
	t.Helper()
	p := &stripe.PaymentIntentRetrieveParams{}
	p.AddExpand("latest_charge")
	pi, err := sc.V1PaymentIntents.Retrieve(t.Context(), id, p)
	if err != nil {
		t.Fatalf("retrieve %s: %v", id, err)
	}
	return pi
}

func eventTypesOf(t *testing.T, sc *stripe.Client, objectID string) []string {
	t.Helper()
	var out []string
	evs := allEvents(t, sc, nil)
	for _, ev := range evs {
		if ev.Data.Object["id"] == objectID || ev.Data.Object["payment_intent"] == objectID {
			out = append(out, string(ev.Type))
		}
	}
	return out
}

func TestManualCaptureHoldsUntilCapturedInFull(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	pi := h.authorize(sc, 1500, "hold-1")
	if pi.Status != stripe.PaymentIntentStatusRequiresCapture || pi.AmountCapturable != 1500 || pi.AmountReceived != 0 ||
		pi.CaptureMethod != stripe.PaymentIntentCaptureMethodManual {
		t.Fatalf("after confirm: status %s capturable %d received %d method %s, want requires_capture 1500 0 manual",
			pi.Status, pi.AmountCapturable, pi.AmountReceived, pi.CaptureMethod)
	}
	if ch := withCharge(t, sc, pi.ID).LatestCharge; ch == nil || ch.Captured || ch.AmountCaptured != 0 {
		t.Fatalf("the held charge should exist uncaptured: %+v", ch)
	}
	got, err := capture(t, sc, pi.ID, 0, "cap-1")
	if err != nil {
		t.Fatalf("capture: %v", err)
	}
	if got.Status != stripe.PaymentIntentStatusSucceeded || got.AmountReceived != 1500 || got.AmountCapturable != 0 {
		t.Fatalf("after capture: status %s received %d capturable %d, want succeeded 1500 0", got.Status, got.AmountReceived, got.AmountCapturable)
	}
	ch := withCharge(t, sc, pi.ID).LatestCharge
	if !ch.Captured || ch.AmountCaptured != 1500 || ch.AmountRefunded != 0 {
		t.Fatalf("captured charge: %+v", ch)
	}
	want := []string{"payment_intent.created", "charge.succeeded", "payment_intent.amount_capturable_updated",
		"charge.captured", "payment_intent.succeeded"}
	if got := eventTypesOf(t, sc, pi.ID); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	// A second capture with another key is refused: the hold is spent.
	_, err = capture(t, sc, pi.ID, 0, "cap-2")
	if se := stripeErr(t, err); se.Code != stripe.ErrorCodePaymentIntentUnexpectedState || se.HTTPStatusCode != http.StatusBadRequest {
		t.Fatalf("second capture: %d %s, want 400 payment_intent_unexpected_state", se.HTTPStatusCode, se.Code)
	}
}

func TestPartialCaptureReleasesTheRest(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	pi := h.authorize(sc, 1000, "hold-partial")
	_, err := capture(t, sc, pi.ID, 1001, "cap-too-much")
	if se := stripeErr(t, err); se.Code != stripe.ErrorCodeAmountTooLarge || se.Param != "amount_to_capture" {
		t.Fatalf("capturing more than the hold: %s %s, want amount_too_large amount_to_capture", se.Code, se.Param)
	}
	got, err := capture(t, sc, pi.ID, 600, "cap-partial")
	if err != nil || got.Status != stripe.PaymentIntentStatusSucceeded || got.AmountReceived != 600 || got.Amount != 1000 {
		t.Fatalf("partial capture: %v %+v", err, got)
	}
	ch := withCharge(t, sc, pi.ID).LatestCharge
	if ch.AmountCaptured != 600 || ch.AmountRefunded != 400 || ch.Refunded {
		t.Fatalf("charge after partial capture: captured %d refunded %d (%v), want 600 400 false", ch.AmountCaptured, ch.AmountRefunded, ch.Refunded)
	}
	// Only what was captured can be refunded.
	_, err = sc.V1Refunds.Create(t.Context(), &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(601)})
	if se := stripeErr(t, err); se.Code != stripe.ErrorCodeAmountTooLarge {
		t.Fatalf("refunding more than captured: %s, want amount_too_large", se.Code)
	}
	rf, err := sc.V1Refunds.Create(t.Context(), &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)})
	if err != nil || rf.Amount != 600 {
		t.Fatalf("refund of the rest: %v %+v, want 600", err, rf)
	}
	if ch := withCharge(t, sc, pi.ID).LatestCharge; !ch.Refunded || ch.AmountRefunded != 1000 {
		t.Fatalf("charge after refunding the capture: %+v", ch)
	}
}

func TestCancelReleasesAHoldAndCaptureIsThenRefused(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	pi := h.authorize(sc, 800, "hold-cancel")
	p := &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String("abandoned")}
	p.SetIdempotencyKey("cancel-1")
	got, err := sc.V1PaymentIntents.Cancel(t.Context(), pi.ID, p)
	if err != nil || got.Status != stripe.PaymentIntentStatusCanceled || got.CancellationReason != "abandoned" || got.AmountCapturable != 0 {
		t.Fatalf("cancel: %v %+v", err, got)
	}
	if ch := withCharge(t, sc, pi.ID).LatestCharge; ch.Captured || ch.AmountRefunded != 800 || !ch.Refunded {
		t.Fatalf("released charge: %+v", ch)
	}
	again, err := sc.V1PaymentIntents.Cancel(t.Context(), pi.ID, p)
	if err != nil || again.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("cancel again with the same key should replay: %v", err)
	}
	_, err = capture(t, sc, pi.ID, 0, "cap-canceled")
	if se := stripeErr(t, err); se.Code != stripe.ErrorCodePaymentIntentUnexpectedState {
		t.Fatalf("capture of a canceled hold: %s, want payment_intent_unexpected_state", se.Code)
	}
}

func TestHoldExpiresAndCaptureIsRefusedWithStripesError(t *testing.T) {
	ep := newEndpoint(t)
	h := start(t, providersim.Config{HoldExpiry: 30 * time.Second, WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret,
		WebhookEvents: []string{"payment_intent.amount_capturable_updated", "payment_intent.canceled", "charge.expired"}})
	sc := h.client()
	pi := h.authorize(sc, 700, "hold-expiry")
	h.clock.Advance(29 * time.Second)
	if got, _ := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil); got.Status != stripe.PaymentIntentStatusRequiresCapture {
		t.Fatalf("before expiry: %s, want requires_capture", got.Status)
	}
	h.clock.Advance(time.Second)
	eventually(t, "the hold to expire", func() bool {
		got, err := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil)
		return err == nil && got.Status == stripe.PaymentIntentStatusCanceled &&
			got.CancellationReason == stripe.PaymentIntentCancellationReasonAutomatic
	})
	eventually(t, "three webhooks", func() bool { return ep.count() == 3 })
	var types []string
	for _, d := range ep.received() {
		types = append(types, d.Type)
	}
	if want := []string{"payment_intent.amount_capturable_updated", "charge.expired", "payment_intent.canceled"}; !slices.Equal(types, want) {
		t.Fatalf("webhooks %v, want %v", types, want)
	}
	_, err := capture(t, sc, pi.ID, 0, "cap-late")
	se := stripeErr(t, err)
	if se.HTTPStatusCode != http.StatusBadRequest || se.Code != stripe.ErrorCodeChargeExpiredForCapture ||
		se.PaymentIntent == nil || se.PaymentIntent.Status != stripe.PaymentIntentStatusCanceled {
		t.Fatalf("capture after expiry: %d %s %+v, want 400 charge_expired_for_capture with the canceled intent", se.HTTPStatusCode, se.Code, se.PaymentIntent)
	}
	if h.srv.Stats().HoldsExpired != 1 {
		t.Fatalf("stats: %+v", h.srv.Stats())
	}
}

func TestCaptureIdempotencyAndFaults(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	pi := h.authorize(sc, 900, "hold-faults")
	// A 5xx is refused before execution: the hold stays, the key stays fresh.
	f := providersim.DefaultFaults()
	f.ServerErrorRate = 1
	if err := h.srv.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	if _, err := capture(t, sc, pi.ID, 500, "cap-k"); stripeErr(t, err).HTTPStatusCode != http.StatusInternalServerError {
		t.Fatalf("want an injected 500, got %v", err)
	}
	if err := h.srv.SetFaults(providersim.DefaultFaults()); err != nil {
		t.Fatal(err)
	}
	if got, err := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil); err != nil || got.Status != stripe.PaymentIntentStatusRequiresCapture {
		t.Fatalf("a 500 captured the hold: %v %v", err, got)
	}
	// A hang executes and withholds the answer: the retry replays it.
	f = providersim.DefaultFaults()
	f.HangRate = 1
	if err := h.srv.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	impatient := h.clientWith(testKey, &http.Client{Timeout: 100 * time.Millisecond})
	_, err := capture(t, impatient, pi.ID, 500, "cap-k")
	var se *stripe.Error
	if err == nil || errors.As(err, &se) {
		t.Fatalf("want a timeout, got %v", err)
	}
	if err := h.srv.SetFaults(providersim.DefaultFaults()); err != nil {
		t.Fatal(err)
	}
	got, err := capture(t, sc, pi.ID, 500, "cap-k")
	if err != nil || got.LastResponse.Header.Get("Idempotent-Replayed") != "true" || got.AmountReceived != 500 {
		t.Fatalf("retry after the hang: %v %+v, want a replay of the 500 capture", err, got)
	}
	_, err = capture(t, sc, pi.ID, 400, "cap-k")
	if se := stripeErr(t, err); se.Type != stripe.ErrorTypeIdempotency {
		t.Fatalf("same key, other amount: %s, want idempotency_error", se.Type)
	}
	// Holds show in lists like any payment.
	it := sc.V1PaymentIntents.List(t.Context(), &stripe.PaymentIntentListParams{})
	for p, err := range it {
		if err != nil {
			t.Fatal(err)
		}
		if p.ID == pi.ID && (p.CaptureMethod != stripe.PaymentIntentCaptureMethodManual || p.AmountReceived != 500) {
			t.Fatalf("listed hold: %+v", p)
		}
	}
}

func TestHoldsAndTheirExpirySurviveARestart(t *testing.T) {
	dir := t.TempDir()
	h := start(t, providersim.Config{DataDir: dir, HoldExpiry: time.Minute})
	sc := h.client()
	keep := h.authorize(sc, 300, "hold-kept")
	lapse := h.authorize(sc, 400, "hold-lapsed")
	h.restart()
	got, err := capture(t, sc, keep.ID, 200, "cap-after-restart")
	if err != nil || got.AmountReceived != 200 || got.CaptureMethod != stripe.PaymentIntentCaptureMethodManual {
		t.Fatalf("capture after restart: %v %+v", err, got)
	}
	h.clock.Advance(time.Minute)
	eventually(t, "the other hold to expire after the restart", func() bool {
		pi, err := sc.V1PaymentIntents.Retrieve(t.Context(), lapse.ID, nil)
		return err == nil && pi.Status == stripe.PaymentIntentStatusCanceled
	})
}

func TestCaptureMethodAndCaptureParametersAreValidated(t *testing.T) {
	h := start(t, providersim.Config{})
	status, body := h.do(http.MethodPost, "/v1/payment_intents", form("amount", "100", "currency", "eur", "capture_method", "later"), nil)
	if e, _ := body["error"].(map[string]any); status != http.StatusBadRequest || e["param"] != "capture_method" {
		t.Fatalf("bad capture_method: %d %v", status, body)
	}
	pi := h.authorize(h.client(), 100, "hold-validate")
	status, body = h.do(http.MethodPost, "/v1/payment_intents/"+pi.ID+"/capture", form("amount_to_capture", "0"), nil)
	if e, _ := body["error"].(map[string]any); status != http.StatusBadRequest || e["param"] != "amount_to_capture" {
		t.Fatalf("zero amount_to_capture: %d %v", status, body)
	}
	status, _ = h.do(http.MethodPost, "/v1/payment_intents/pi_missing/capture", "", nil)
	if status != http.StatusNotFound {
		t.Fatalf("unknown intent: %d, want 404", status)
	}
}
