package paymentprovider_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/providersim"
)

const whsec = "whsec_gateway"

// received is what a webhook handler built on Verify accepted and refused.
type received struct {
	mu       sync.Mutex
	events   []paymentprovider.Event
	payloads [][]byte
	headers  []string
}

func TestVerifyAcceptsSimulatorWebhooks(t *testing.T) {
	var got received
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := paymentprovider.Verify(body, r.Header.Get("Stripe-Signature"), whsec)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got.mu.Lock()
		got.events = append(got.events, ev)
		got.payloads = append(got.payloads, body)
		got.headers = append(got.headers, r.Header.Get("Stripe-Signature"))
		got.mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	r := newRig(t, providersim.Config{WebhookEndpoints: []string{hook.URL}, WebhookSecret: whsec}, paymentprovider.Config{})
	p, err := r.gw.CreateAndConfirm(t.Context(), intent("pay-w", 100, providersim.PaymentMethodVisa))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got.mu.Lock()
		n := len(got.events)
		got.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d webhooks verified, want 3 (stats %+v)", n, r.sim.Stats())
		}
		<-time.After(time.Millisecond)
	}
	last := got.events[2]
	if last.Type != "payment_intent.succeeded" || last.Payment == nil || last.Payment.Status != paymentprovider.StatusSucceeded || last.PaymentID != p.ProviderID {
		t.Fatalf("verified event %+v", last)
	}
	if got.events[1].Type != "charge.succeeded" || got.events[1].PaymentID != p.ProviderID {
		t.Fatalf("charge event %+v", got.events[1])
	}
	if r.sim.Stats().WebhookFailures != 0 {
		t.Fatalf("some deliveries were refused: %+v", r.sim.Stats())
	}

	body, header := got.payloads[2], got.headers[2]
	tampered := append([]byte{}, body...)
	tampered[10] ^= 0x20
	if _, err := paymentprovider.Verify(tampered, header, whsec); !errors.Is(err, paymentprovider.ErrBadSignature) {
		t.Fatalf("tampered body: %v, want ErrBadSignature", err)
	}
	if _, err := paymentprovider.Verify(body, header, "whsec_wrong"); !errors.Is(err, paymentprovider.ErrBadSignature) {
		t.Fatalf("wrong secret: %v, want ErrBadSignature", err)
	}
	if _, err := paymentprovider.Verify(body, "", whsec); !errors.Is(err, paymentprovider.ErrBadSignature) {
		t.Fatalf("no header: %v, want ErrBadSignature", err)
	}
}

func TestVerifyRejectsStaleTimestamps(t *testing.T) {
	payload := []byte(`{"id":"evt_1","object":"event","api_version":"` + providersim.DefaultAPIVersion + `","type":"payment_intent.created","created":1,"data":{"object":{"id":"pi_1","object":"payment_intent","status":"requires_payment_method"}}}`)
	fresh := providersim.SignatureHeader(whsec, time.Now(), payload)
	if _, err := paymentprovider.Verify(payload, fresh, whsec); err != nil {
		t.Fatalf("fresh signature rejected: %v", err)
	}
	edge := providersim.SignatureHeader(whsec, time.Now().Add(-paymentprovider.WebhookTolerance+5*time.Second), payload)
	if _, err := paymentprovider.Verify(payload, edge, whsec); err != nil {
		t.Fatalf("signature inside the tolerance rejected: %v", err)
	}
	stale := providersim.SignatureHeader(whsec, time.Now().Add(-paymentprovider.WebhookTolerance-time.Second), payload)
	if _, err := paymentprovider.Verify(payload, stale, whsec); !errors.Is(err, paymentprovider.ErrBadSignature) {
		t.Fatalf("stale signature: %v, want ErrBadSignature", err)
	}
}

// A signature dated ahead of our clock by more than the tolerance could be
// replayed until the clock catches up: refused, the timestamp read as
// stripe-go reads it (the last t= of the header).
func TestVerifyRejectsTimestampsFromTheFuture(t *testing.T) {
	payload := []byte(`{"id":"evt_1","object":"event","api_version":"` + providersim.DefaultAPIVersion + `","type":"payment_intent.created","created":1,"data":{"object":{"id":"pi_1","object":"payment_intent","status":"requires_payment_method"}}}`)
	at := func(d time.Duration) string { return providersim.SignatureHeader(whsec, time.Now().Add(d), payload) }
	ahead := paymentprovider.WebhookTolerance + time.Minute
	future := at(ahead)
	_, futureT, _ := strings.Cut(strings.Split(future, ",")[0], "=")
	for _, c := range []struct {
		name, header string
		refused      bool
	}{
		{"inside the tolerance ahead", at(paymentprovider.WebhookTolerance - 30*time.Second), false},
		{"beyond the tolerance ahead", future, true},
		{"a future t= before the t= that is signed", "t=" + futureT + "," + at(0), false},
		{"a second t= that is future and signed", "t=1," + future, true},
	} {
		_, err := paymentprovider.Verify(payload, c.header, whsec)
		switch {
		case c.refused && !errors.Is(err, paymentprovider.ErrSignedInTheFuture):
			t.Errorf("%s: %v, want ErrSignedInTheFuture", c.name, err)
		case c.refused && !errors.Is(err, paymentprovider.ErrBadSignature):
			t.Errorf("%s: %v does not wrap ErrBadSignature", c.name, err)
		case !c.refused && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		}
	}
}
