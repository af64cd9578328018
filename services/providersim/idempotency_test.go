package providersim_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

func TestSameIdempotencyKeyTwiceReturnsTheSamePaymentIntent(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	first := h.mustCreate(sc, providersim.PaymentMethodVisa, 1200, "order-42")
	second := h.mustCreate(sc, providersim.PaymentMethodVisa, 1200, "order-42")
	if second.ID != first.ID {
		t.Fatalf("second create with the same key made %s, want the first %s", second.ID, first.ID)
	}
	if second.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("second answer not marked as replayed")
	}
	if string(second.LastResponse.RawJSON) != string(first.LastResponse.RawJSON) {
		t.Fatalf("replayed body differs:\n%s\n%s", first.LastResponse.RawJSON, second.LastResponse.RawJSON)
	}
	n := 0
	for _, err := range sc.V1PaymentIntents.List(t.Context(), &stripe.PaymentIntentListParams{}) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("%d payment intents exist, want 1", n)
	}
}

func TestSameIdempotencyKeyReplaysADecline(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	_, err1 := h.create(sc, providersim.PaymentMethodDeclined, 1200, "order-7")
	_, err2 := h.create(sc, providersim.PaymentMethodDeclined, 1200, "order-7")
	a, b := stripeErr(t, err1), stripeErr(t, err2)
	if a.PaymentIntent.ID != b.PaymentIntent.ID || b.HTTPStatusCode != http.StatusPaymentRequired {
		t.Fatalf("replayed decline: %s/%d, first %s", b.PaymentIntent.ID, b.HTTPStatusCode, a.PaymentIntent.ID)
	}
}

func TestReusedIdempotencyKeyWithOtherParametersIsRefused(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	first := h.mustCreate(sc, providersim.PaymentMethodVisa, 1200, "order-43")
	_, err := h.create(sc, providersim.PaymentMethodVisa, 1300, "order-43")
	se := stripeErr(t, err)
	if se.HTTPStatusCode != http.StatusBadRequest || se.Type != stripe.ErrorTypeIdempotency {
		t.Fatalf("got %d %s, want 400 idempotency_error", se.HTTPStatusCode, se.Type)
	}
	var ie *stripe.IdempotencyError
	if !isIdempotencyError(err, &ie) {
		t.Fatalf("stripe-go does not see an IdempotencyError: %T", se.Err)
	}
	// Nothing was created, and the key still replays the first answer.
	again := h.mustCreate(sc, providersim.PaymentMethodVisa, 1200, "order-43")
	if again.ID != first.ID {
		t.Fatalf("key now gives %s, want %s", again.ID, first.ID)
	}
	// A different endpoint with the same key is "other parameters" too.
	_, err = sc.V1Refunds.Create(t.Context(), func() *stripe.RefundCreateParams {
		p := &stripe.RefundCreateParams{PaymentIntent: stripe.String(first.ID)}
		p.SetIdempotencyKey("order-43")
		return p
	}())
	if se := stripeErr(t, err); se.Type != stripe.ErrorTypeIdempotency {
		t.Fatalf("same key on refunds: %s, want idempotency_error", se.Type)
	}
}

func isIdempotencyError(err error, target **stripe.IdempotencyError) bool {
	var se *stripe.Error
	if !asStripe(err, &se) {
		return false
	}
	ie, ok := se.Err.(*stripe.IdempotencyError)
	*target = ie
	return ok
}

func TestIdempotencyKeysExpireAfter24Hours(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	first := h.mustCreate(sc, providersim.PaymentMethodVisa, 1200, "order-44")
	h.clock.Advance(24*time.Hour - time.Second)
	if _, err := h.create(sc, providersim.PaymentMethodVisa, 999, "order-44"); err == nil {
		t.Fatal("key reused with other params inside 24h was accepted")
	}
	h.clock.Advance(time.Second)
	second := h.mustCreate(sc, providersim.PaymentMethodVisa, 999, "order-44")
	if second.ID == first.ID || second.Amount != 999 {
		t.Fatalf("after 24h the key still replays %s", first.ID)
	}
}

func TestValidationErrorsAreNotRecordedUnderTheKey(t *testing.T) {
	h := start(t, providersim.Config{})
	sc := h.client()
	if _, err := h.create(sc, "pm_card_nonsense", 1200, "order-45"); err == nil {
		t.Fatal("unknown payment method accepted")
	}
	pi := h.mustCreate(sc, providersim.PaymentMethodVisa, 1200, "order-45")
	if pi.Status != stripe.PaymentIntentStatusSucceeded {
		t.Fatalf("corrected request with the same key: %s", pi.Status)
	}
}
