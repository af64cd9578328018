package providersim_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

func TestRateLimitAnswers429PerKey(t *testing.T) {
	h := start(t, providersim.Config{RateLimit: 5})
	sc := h.client()
	for i := range 5 {
		if _, err := sc.V1PaymentIntents.Retrieve(t.Context(), "pi_missing", nil); stripeErr(t, err).HTTPStatusCode != 404 {
			t.Fatalf("request %d within the burst was refused: %v", i, err)
		}
	}
	_, err := sc.V1PaymentIntents.Retrieve(t.Context(), "pi_missing", nil)
	se := stripeErr(t, err)
	if se.HTTPStatusCode != http.StatusTooManyRequests || se.Code != stripe.ErrorCodeRateLimit || se.Type != stripe.ErrorTypeInvalidRequest {
		t.Fatalf("6th request: %d %s %s, want 429 invalid_request_error rate_limit", se.HTTPStatusCode, se.Type, se.Code)
	}
	// Another key has its own bucket.
	other := h.clientWith("sk_test_other", http.DefaultClient)
	if _, err := other.V1PaymentIntents.Retrieve(t.Context(), "pi_missing", nil); stripeErr(t, err).HTTPStatusCode != 404 {
		t.Fatalf("other key was limited: %v", err)
	}
	// Tokens come back with time (on the simulator's clock).
	h.clock.Advance(200 * time.Millisecond)
	if _, err := sc.V1PaymentIntents.Retrieve(t.Context(), "pi_missing", nil); stripeErr(t, err).HTTPStatusCode != 404 {
		t.Fatalf("after a refill the request was refused: %v", err)
	}
	if got := h.srv.Stats().RateLimited; got != 1 {
		t.Fatalf("rate_limited = %d, want 1", got)
	}
}

func TestDefaultRateLimitIs25PerSecond(t *testing.T) {
	h := start(t, providersim.Config{RateLimit: providersim.DefaultRateLimit})
	codes := map[int]int{}
	for range 30 {
		code, _ := h.do(http.MethodGet, "/v1/payment_intents", "", nil)
		codes[code]++
	}
	if codes[200] != 25 || codes[429] != 5 {
		t.Fatalf("30 requests in one instant: %v, want 25×200 and 5×429", codes)
	}
}
