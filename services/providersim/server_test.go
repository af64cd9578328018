package providersim_test

import (
	"net/http"
	"testing"

	"github.com/concordhq/concord/services/providersim"
)

func TestBadRequestsGetStripeShaped400s(t *testing.T) {
	h := start(t, providersim.Config{})
	visa := providersim.PaymentMethodVisa
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      map[string]string
		status                   int
		typ, code, param         string
	}{
		{"missing amount", "POST", "/v1/payment_intents", form("currency", "usd"), nil, 400, "invalid_request_error", "parameter_missing", "amount"},
		{"negative amount", "POST", "/v1/payment_intents", form("amount", "-5", "currency", "usd"), nil, 400, "invalid_request_error", "parameter_invalid_integer", "amount"},
		{"zero amount", "POST", "/v1/payment_intents", form("amount", "0", "currency", "usd"), nil, 400, "invalid_request_error", "parameter_invalid_integer", "amount"},
		{"amount not a number", "POST", "/v1/payment_intents", form("amount", "ten", "currency", "usd"), nil, 400, "invalid_request_error", "parameter_invalid_integer", "amount"},
		{"amount too large", "POST", "/v1/payment_intents", form("amount", "100000000", "currency", "usd"), nil, 400, "invalid_request_error", "amount_too_large", "amount"},
		{"missing currency", "POST", "/v1/payment_intents", form("amount", "100"), nil, 400, "invalid_request_error", "parameter_missing", "currency"},
		{"unknown currency", "POST", "/v1/payment_intents", form("amount", "100", "currency", "xyz"), nil, 400, "invalid_request_error", "parameter_invalid_string", "currency"},
		{"unknown payment method", "POST", "/v1/payment_intents", form("amount", "100", "currency", "usd", "payment_method", "pm_card_bogus"), nil, 400, "invalid_request_error", "resource_missing", "payment_method"},
		{"confirm without method", "POST", "/v1/payment_intents", form("amount", "100", "currency", "usd", "confirm", "true"), nil, 400, "invalid_request_error", "parameter_missing", "payment_method"},
		{"confirm not a boolean", "POST", "/v1/payment_intents", form("amount", "100", "currency", "usd", "payment_method", visa, "confirm", "yes"), nil, 400, "invalid_request_error", "", "confirm"},
		{"unknown parameter", "POST", "/v1/payment_intents", form("amount", "100", "currency", "usd", "colour", "red"), nil, 400, "invalid_request_error", "parameter_unknown", "colour"},
		{"malformed form body", "POST", "/v1/payment_intents", "amount=%zz&currency=usd", nil, 400, "invalid_request_error", "", ""},
		{"JSON body", "POST", "/v1/payment_intents", `{"amount":100}`, map[string]string{"Content-Type": "application/json"}, 400, "invalid_request_error", "", ""},
		{"limit above 100", "GET", "/v1/payment_intents?limit=101", "", nil, 400, "invalid_request_error", "parameter_invalid_integer", "limit"},
		{"bad created", "GET", "/v1/events?created[gte]=yesterday", "", nil, 400, "invalid_request_error", "parameter_invalid_integer", "created[gte]"},
		{"unknown cursor", "GET", "/v1/payment_intents?starting_after=pi_nope", "", nil, 400, "invalid_request_error", "resource_missing", "starting_after"},
		{"refund without target", "POST", "/v1/refunds", "", nil, 400, "invalid_request_error", "parameter_missing", "payment_intent"},
		{"refund of unknown payment", "POST", "/v1/refunds", form("payment_intent", "pi_nope"), nil, 400, "invalid_request_error", "resource_missing", "payment_intent"},
		{"unknown payment intent", "GET", "/v1/payment_intents/pi_nope", "", nil, 404, "invalid_request_error", "resource_missing", "intent"},
		{"confirm unknown payment intent", "POST", "/v1/payment_intents/pi_nope/confirm", form("payment_method", visa), nil, 404, "invalid_request_error", "resource_missing", "intent"},
		{"unknown URL", "GET", "/v1/customers", "", nil, 404, "invalid_request_error", "", ""},
		{"no API key", "GET", "/v1/payment_intents", "", map[string]string{"Authorization": ""}, 401, "invalid_request_error", "", ""},
		{"publishable key", "GET", "/v1/payment_intents", "", map[string]string{"Authorization": "Bearer pk_test_abc"}, 401, "invalid_request_error", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := h.do(tc.method, tc.path, tc.body, tc.hdr)
			e, ok := body["error"].(map[string]any)
			if !ok {
				t.Fatalf("%d with no error object: %v", code, body)
			}
			if code != tc.status || e["type"] != tc.typ || str(e["code"]) != tc.code || str(e["param"]) != tc.param || str(e["message"]) == "" {
				t.Fatalf("got %d %v, want %d type=%s code=%s param=%s and a message", code, e, tc.status, tc.typ, tc.code, tc.param)
			}
		})
	}
	if n := h.srv.Stats().EventsCreated; n != 0 {
		t.Fatalf("refused requests created %d events", n)
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func TestHealthz(t *testing.T) {
	h := start(t, providersim.Config{})
	resp, err := http.Get(h.ts.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", err, resp)
	}
	resp.Body.Close()
}
