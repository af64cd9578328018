package paymentprovider

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

// FuzzEventFromBodyErrsInsteadOfPanicking fuzzes the body of a delivery
// whose signature is valid: what the payment service's webhook handler
// gets from Verify once the signature holds. Decoding it into our Event
// (eventFrom, over the stripe.Event stripe-go decodes) must never panic,
// only fail; a decoded event must keep the id and type and tie the object
// it carries to PaymentID; and Verify, given a fresh signature of the
// body, must return exactly that event (or refuse).
func FuzzEventFromBodyErrsInsteadOfPanicking(f *testing.F) {
	v := providersim.DefaultAPIVersion
	for _, s := range []string{
		`{"id":"evt_1","object":"event","api_version":"` + v + `","type":"payment_intent.succeeded","created":1,"data":{"object":{"id":"pi_1","object":"payment_intent","status":"succeeded","amount":100,"latest_charge":{"id":"ch_1","amount_refunded":0}}}}`,
		`{"id":"evt_2","object":"event","api_version":"` + v + `","type":"payment_intent.payment_failed","created":1,"data":{"object":{"id":"pi_1","object":"payment_intent","status":"requires_payment_method","last_payment_error":{"code":"card_declined","decline_code":"insufficient_funds","message":"no"}}}}`,
		`{"id":"evt_3","object":"event","api_version":"` + v + `","type":"refund.created","created":1,"data":{"object":{"id":"re_1","object":"refund","amount":100,"status":"succeeded","payment_intent":"pi_1"}}}`,
		`{"id":"evt_4","object":"event","api_version":"` + v + `","type":"charge.succeeded","created":1,"data":{"object":{"id":"ch_1","object":"charge","payment_intent":"pi_1"}}}`,
		`{"id":"evt_5","object":"event","api_version":"` + v + `","type":"payment_intent.created","data":{"object":null}}`,
		`{"id":"evt_6","object":"event","api_version":"` + v + `","type":"refund.created","data":{"object":[]}}`,
		`{"id":"evt_7","object":"event","api_version":"` + v + `","type":"charge.refunded","data":{"object":{"payment_intent":{"id":"pi_1"}}}}`,
		`{"id":"evt_8","object":"event","api_version":"` + v + `","type":"payment_intent.canceled"}`,
		`{"type":"payment_intent.succeeded","data":{}}`,
		`{"data":null}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var ev stripe.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			return // stripe-go refuses it before eventFrom sees it
		}
		got, err := eventFrom(&ev)
		if err == nil {
			if got.ID != ev.ID || got.Type != string(ev.Type) {
				t.Fatalf("eventFrom(%q) = %+v: id or type lost", body, got)
			}
			if got.Payment != nil && got.PaymentID != got.Payment.ProviderID {
				t.Fatalf("eventFrom(%q): PaymentID %q, payment %q", body, got.PaymentID, got.Payment.ProviderID)
			}
			if got.Refund != nil && got.PaymentID != got.Refund.PaymentID {
				t.Fatalf("eventFrom(%q): PaymentID %q, refund's %q", body, got.PaymentID, got.Refund.PaymentID)
			}
			if ev.Data != nil && strings.HasPrefix(got.Type, "payment_intent.") && got.Payment == nil {
				t.Fatalf("eventFrom(%q): a payment_intent event with data and no payment", body)
			}
		}
		header := providersim.SignatureHeader(whsecFuzz, time.Now(), body)
		verified, verr := Verify(body, header, whsecFuzz)
		if verr == nil {
			if err != nil {
				t.Fatalf("Verify accepted %q, which eventFrom refuses: %v", body, err)
			}
			if !reflect.DeepEqual(verified, got) {
				t.Fatalf("Verify(%q) = %+v, eventFrom %+v", body, verified, got)
			}
		}
	})
}

const whsecFuzz = "whsec_fuzz"
