package providersim_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
	"github.com/stripe/stripe-go/v84/webhook"
)

const secret = "whsec_test_secret"

// referenceHMAC is printf '1700000000.{"id":"evt_1"}' | openssl dgst -sha256 -hmac whsec_test_secret
const referenceHMAC = "248a374f50f943a28b0f6ab50faf9a7e7e29b710fa26df9fb1618b9bf8ea9c9a"

func TestWebhookSignedBySimulatorVerifiesWithStripeGo(t *testing.T) {
	ep := newEndpoint(t)
	h := start(t, providersim.Config{WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret})
	pi := h.mustCreate(h.client(), providersim.PaymentMethodVisa, 100, "hook")
	eventually(t, "3 webhooks", func() bool { return ep.count() == 3 })
	ep.mu.Lock()
	body, sig := ep.bodies[2], ep.headers[2]
	ep.mu.Unlock()
	ev, err := webhook.ConstructEvent(body, sig, secret)
	if err != nil {
		t.Fatalf("stripe-go rejects the simulator's signature: %v", err)
	}
	if ev.Type != "payment_intent.succeeded" || ev.Data.Object["id"] != pi.ID {
		t.Fatalf("verified event is %s on %v", ev.Type, ev.Data.Object["id"])
	}
	if _, err := webhook.ConstructEvent(body, sig, "whsec_other"); err == nil {
		t.Fatal("signature verified with the wrong secret")
	}
	tampered := append([]byte{}, body...)
	tampered[len(tampered)-2] ^= 1
	if _, err := webhook.ConstructEvent(tampered, sig, secret); err == nil {
		t.Fatal("tampered body verified")
	}
}

func TestSignatureHeaderIsHMACOverTimestampDotBody(t *testing.T) {
	got := providersim.SignatureHeader(secret, time.Unix(1700000000, 0), []byte(`{"id":"evt_1"}`))
	want := "t=1700000000,v1=" + referenceHMAC
	if got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestWebhookRetriedWithDoublingBackoffUntil2xx(t *testing.T) {
	ep := newEndpoint(t)
	ep.failType, ep.failures = "payment_intent.created", 3
	h := start(t, providersim.Config{WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret,
		WebhookBackoff: 10 * time.Second, WebhookMaxBackoff: time.Hour})
	t0 := h.clock.Now()
	pi, err := h.client().V1PaymentIntents.Create(t.Context(), &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(100), Currency: stripe.String("usd")})
	if err != nil {
		t.Fatal(err)
	}
	// Each failure must be recorded (and its retry scheduled) before the
	// clock moves.
	failed := func(n int) {
		eventually(t, "failed attempt", func() bool { return h.srv.Stats().WebhookFailures == int64(n) })
	}
	failed(1)
	// barrier delivers another event: once it has arrived, the dispatcher
	// has looked at the queue at the current clock.
	barriers := 0
	barrier := func() {
		barriers++
		if err := h.srv.ForceStatus(pi.ID, providersim.StatusRequiresPaymentMethod, true); err != nil {
			t.Fatal(err)
		}
		eventually(t, "barrier event", func() bool { return len(ep.attemptsOf("payment_intent.payment_failed")) == barriers })
	}
	for i, backoff := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		h.clock.Advance(backoff - time.Second)
		barrier()
		if n := len(ep.attemptsOf("payment_intent.created")); n != i+1 {
			t.Fatalf("retry %d came before its %v backoff (%d attempts)", i+1, backoff, n)
		}
		h.clock.Advance(time.Second)
		eventually(t, "retry", func() bool { return len(ep.attemptsOf("payment_intent.created")) == i+2 })
		if i < 2 {
			failed(i + 2)
		}
	}
	got := ep.attemptsOf("payment_intent.created")
	last := got[len(got)-1]
	if !last.ok || last.sig[:len("t=1234567890")] != fmt.Sprintf("t=%d", t0.Add(70*time.Second).Unix()) {
		t.Fatalf("final attempt %+v, want a success signed at t0+70s", last)
	}
	if st := h.srv.Stats(); st.WebhookFailures != 3 || st.WebhooksGivenUp != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestWebhookGivenUpAfterMaxAttempts(t *testing.T) {
	ep := newEndpoint(t)
	ep.failures = 1000
	h := start(t, providersim.Config{WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret,
		WebhookBackoff: time.Second, WebhookMaxBackoff: time.Second, WebhookMaxAttempts: 3})
	if _, err := h.client().V1PaymentIntents.Create(t.Context(), &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(100), Currency: stripe.String("usd")}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		// Wait until the failure is recorded (and the retry scheduled)
		// before moving the clock.
		eventually(t, "failed attempt", func() bool { return h.srv.Stats().WebhookFailures == int64(i) })
		h.clock.Advance(time.Second)
	}
	eventually(t, "give up", func() bool { return h.srv.Stats().WebhooksGivenUp == 1 })
	if st := h.srv.Stats(); st.WebhookFailures != 3 || st.WebhooksPending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// An endpoint subscribed to some event types (Stripe's enabled_events)
// gets only those; the Events API still lists every event, and each says
// how many endpoints it is pending for.
func TestWebhookEventsFilterWhatEndpointsReceive(t *testing.T) {
	ep := newEndpoint(t)
	h := start(t, providersim.Config{WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret,
		WebhookEvents: []string{"payment_intent.succeeded", "refund.created"}})
	sc := h.client()
	pi := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "filtered")
	if _, err := sc.V1Refunds.Create(t.Context(), &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)}); err != nil {
		t.Fatal(err)
	}
	// Deliveries go out in event order, so once the refund's arrived every
	// earlier enabled event has too.
	eventually(t, "refund.created delivered", func() bool {
		got := ep.received()
		return len(got) > 0 && got[len(got)-1].Type == "refund.created"
	})
	var types []string
	for _, d := range ep.received() {
		types = append(types, d.Type)
	}
	if want := []string{"payment_intent.succeeded", "refund.created"}; !slices.Equal(types, want) {
		t.Fatalf("endpoint received %v, want %v", types, want)
	}
	listed := map[string]int64{}
	for _, ev := range allEvents(t, sc, nil) {
		listed[string(ev.Type)] = ev.PendingWebhooks
	}
	want := map[string]int64{"payment_intent.created": 0, "charge.succeeded": 0, "payment_intent.succeeded": 1,
		"refund.created": 1, "charge.refunded": 0}
	if !maps.Equal(listed, want) {
		t.Fatalf("events listed with pending webhooks %v, want %v", listed, want)
	}
}

func TestWebhookEventsRefuseUnknownTypes(t *testing.T) {
	_, err := providersim.New(providersim.Config{WebhookEndpoints: []string{"http://127.0.0.1:1"}, WebhookSecret: secret,
		WebhookEvents: []string{"payment_intent.suceeded"}})
	if err == nil || !strings.Contains(err.Error(), `"payment_intent.suceeded"`) {
		t.Fatalf("a misspelt event type was accepted or not named: %v", err)
	}
}

// With WebhookConcurrency n, n deliveries are in flight at once and no
// more: an endpoint slower than the payment rate still keeps up.
func TestWebhookConcurrencyOverlapsDeliveries(t *testing.T) {
	const n = 4
	var mu sync.Mutex
	inFlight, most, total := 0, 0, 0
	release := make(chan struct{})
	var once sync.Once
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		total++
		most = max(most, inFlight)
		if inFlight == n {
			// Hold the first n a while: more arrive meanwhile only if
			// the simulator sends more than n at once.
			once.Do(func() { time.AfterFunc(300*time.Millisecond, func() { close(release) }) })
		}
		mu.Unlock()
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}))
	t.Cleanup(ts.Close)
	h := start(t, providersim.Config{WebhookEndpoints: []string{ts.URL}, WebhookSecret: secret, WebhookConcurrency: n})
	for i := range 3 { // three events each: 9 deliveries
		h.mustCreate(h.client(), providersim.PaymentMethodVisa, 100, fmt.Sprintf("conc-%d", i))
	}
	eventually(t, "9 deliveries", func() bool { mu.Lock(); defer mu.Unlock(); return total == 9 && inFlight == 0 })
	if most != n {
		t.Fatalf("at most %d deliveries were in flight at once; want %d", most, n)
	}
}
