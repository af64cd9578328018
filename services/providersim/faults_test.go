package providersim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

// outcomes sends n confirmed creates and returns each answer's HTTP status.
func outcomes(t *testing.T, h *harness, n int) []int {
	t.Helper()
	sc := h.client()
	out := make([]int, 0, n)
	for i := range n {
		_, err := h.create(sc, providersim.PaymentMethodVisa, 100, fmt.Sprintf("k%d", i))
		switch {
		case err == nil:
			out = append(out, 200)
		default:
			out = append(out, stripeErr(t, err).HTTPStatusCode)
		}
	}
	return out
}

func count(xs []int, v int) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}

func TestRequestFaultsAreReproducibleUnderOneSeed(t *testing.T) {
	f := providersim.DefaultFaults()
	f.RateLimitRate, f.ServerErrorRate = 0.2, 0.2
	run := func(seed uint64) []int { return outcomes(t, start(t, providersim.Config{Seed: seed, Faults: f}), 60) }
	a, b, c := run(7), run(7), run(8)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different faults:\n%v\n%v", a, b)
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatalf("seeds 7 and 8 gave identical faults %v", a)
	}
	if count(a, 429) == 0 || count(a, 500) == 0 || count(a, 200) == 0 {
		t.Fatalf("want a mix of 200, 429 and 500, got %v", a)
	}
}

func TestInjected429And5xxHaveNoEffect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    func(*providersim.Faults)
		status int
		typ    stripe.ErrorType
		code   stripe.ErrorCode
	}{
		{"429", func(f *providersim.Faults) { f.RateLimitRate = 1 }, 429, stripe.ErrorTypeInvalidRequest, stripe.ErrorCodeRateLimit},
		{"5xx", func(f *providersim.Faults) { f.ServerErrorRate = 1 }, 500, stripe.ErrorTypeAPI, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := providersim.DefaultFaults()
			tc.set(&f)
			h := start(t, providersim.Config{Faults: f})
			_, err := h.create(h.client(), providersim.PaymentMethodVisa, 100, "k")
			se := stripeErr(t, err)
			if se.HTTPStatusCode != tc.status || se.Type != tc.typ || se.Code != tc.code {
				t.Fatalf("got %d %s %s, want %d %s %s", se.HTTPStatusCode, se.Type, se.Code, tc.status, tc.typ, tc.code)
			}
			// Nothing happened: once the fault is off, the key is fresh.
			if err := h.srv.SetFaults(providersim.DefaultFaults()); err != nil {
				t.Fatal(err)
			}
			pi := h.mustCreate(h.client(), providersim.PaymentMethodVisa, 100, "k")
			if pi.LastResponse.Header.Get("Idempotent-Replayed") != "" || h.srv.Stats().EventsCreated != 3 {
				t.Fatalf("the refused request left traces: replayed=%q stats %+v", pi.LastResponse.Header.Get("Idempotent-Replayed"), h.srv.Stats())
			}
		})
	}
}

func TestHangExecutesButWithholdsTheAnswer(t *testing.T) {
	f := providersim.DefaultFaults()
	f.HangRate = 1
	h := start(t, providersim.Config{Faults: f})
	impatient := h.clientWith(testKey, &http.Client{Timeout: 100 * time.Millisecond})
	_, err := h.create(impatient, providersim.PaymentMethodVisa, 100, "hung")
	var se *stripe.Error
	if err == nil || errors.As(err, &se) {
		t.Fatalf("want a transport timeout, got %v", err)
	}
	if st := h.srv.Stats(); st.Hung != 1 || st.EventsCreated != 3 {
		t.Fatalf("the hung request should have executed: %+v", st)
	}
	if err := h.srv.SetFaults(providersim.DefaultFaults()); err != nil {
		t.Fatal(err)
	}
	pi := h.mustCreate(h.client(), providersim.PaymentMethodVisa, 100, "hung")
	if pi.LastResponse.Header.Get("Idempotent-Replayed") != "true" || pi.Status != stripe.PaymentIntentStatusSucceeded {
		t.Fatalf("retry after a hang should replay the executed charge: %s replayed=%q", pi.Status, pi.LastResponse.Header.Get("Idempotent-Replayed"))
	}
}

func TestLatencyDelaysEveryAnswer(t *testing.T) {
	f := providersim.DefaultFaults()
	f.Latency = 150 * time.Millisecond
	h := start(t, providersim.Config{Faults: f})
	began := time.Now()
	h.mustCreate(h.client(), providersim.PaymentMethodVisa, 100, "slow")
	if took := time.Since(began); took < f.Latency {
		t.Fatalf("answer took %v, want at least %v", took, f.Latency)
	}
	// A caller that gives up earlier gets a timeout.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	p := &stripe.PaymentIntentRetrieveParams{}
	if _, err := h.client().V1PaymentIntents.Retrieve(ctx, "pi_x", p); err == nil {
		t.Fatal("want a timeout")
	}
}

func TestProcessingRateHoldsPaymentsThenSucceeds(t *testing.T) {
	f := providersim.DefaultFaults()
	f.ProcessingRate, f.ProcessingDelay = 1, 30*time.Second
	h := start(t, providersim.Config{Faults: f})
	sc := h.client()
	pi := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "held")
	if pi.Status != stripe.PaymentIntentStatusProcessing {
		t.Fatalf("status %s, want processing", pi.Status)
	}
	h.clock.Advance(30 * time.Second)
	eventually(t, "held payment to succeed", func() bool {
		got, err := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil)
		return err == nil && got.Status == stripe.PaymentIntentStatusSucceeded
	})
	if h.srv.Stats().ProcessingHeld != 1 {
		t.Fatalf("stats %+v", h.srv.Stats())
	}
}

func TestLateReversalRefundsASucceededPaymentLater(t *testing.T) {
	f := providersim.DefaultFaults()
	f.LateReversalRate, f.LateReversalDelay = 1, time.Hour
	h := start(t, providersim.Config{Faults: f})
	sc := h.client()
	pi := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "reversed")
	h.clock.Advance(time.Hour)
	p := &stripe.PaymentIntentRetrieveParams{}
	p.AddExpand("latest_charge")
	eventually(t, "late reversal", func() bool {
		got, err := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, p)
		return err == nil && got.LatestCharge != nil && got.LatestCharge.Refunded && got.LatestCharge.AmountRefunded == 100
	})
	var refunds int
	for r, err := range sc.V1Refunds.List(t.Context(), &stripe.RefundListParams{PaymentIntent: stripe.String(pi.ID)}) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Reason != stripe.RefundReasonFraudulent {
			t.Errorf("reason %s", r.Reason)
		}
		refunds++
	}
	if refunds != 1 || h.srv.Stats().LateReversals != 1 {
		t.Fatalf("%d refunds, stats %+v", refunds, h.srv.Stats())
	}
}

func TestWebhookDropAndDuplicate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*providersim.Faults)
		want int // deliveries for the 3 events of one succeeding payment
	}{
		{"drop", func(f *providersim.Faults) { f.WebhookDropRate = 1 }, 0},
		{"duplicate", func(f *providersim.Faults) { f.WebhookDuplicateRate = 1 }, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := newEndpoint(t)
			f := providersim.DefaultFaults()
			tc.set(&f)
			h := start(t, providersim.Config{WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret, Faults: f})
			pi := h.mustCreate(h.client(), providersim.PaymentMethodVisa, 100, "w")
			// A barrier event without faults: once it arrives, everything
			// queued before it has been decided.
			if err := h.srv.SetFaults(providersim.DefaultFaults()); err != nil {
				t.Fatal(err)
			}
			if err := h.srv.ForceStatus(pi.ID, providersim.StatusCanceled, true); err != nil {
				t.Fatal(err)
			}
			eventually(t, "barrier", func() bool { return len(ep.attemptsOf("payment_intent.canceled")) == 1 })
			if got := ep.count() - 1; got != tc.want {
				t.Fatalf("%d deliveries, want %d", got, tc.want)
			}
			st := h.srv.Stats()
			if st.WebhooksDropped+st.WebhooksDuplicated != 3 {
				t.Fatalf("stats %+v", st)
			}
			if len(allEvents(t, h.client(), nil)) != 4 {
				t.Fatal("dropped webhooks must still be listed as events")
			}
		})
	}
}

func TestWebhookReorderDeliversTheNextEventFirst(t *testing.T) {
	ep := newEndpoint(t)
	f := providersim.DefaultFaults()
	f.WebhookReorderRate, f.WebhookDelay = 1, time.Hour
	h := start(t, providersim.Config{WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret, Faults: f})
	sc := h.client()
	pi, err := sc.V1PaymentIntents.Create(t.Context(), &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(1), Currency: stripe.String("usd")})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.srv.SetFaults(providersim.DefaultFaults()); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.V1PaymentIntents.Cancel(t.Context(), pi.ID, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both webhooks", func() bool { return ep.count() == 2 })
	got := ep.received()
	if got[0].Type != "payment_intent.canceled" || got[1].Type != "payment_intent.created" {
		t.Fatalf("arrival order %s, %s; want canceled before created", got[0].Type, got[1].Type)
	}
}

func TestWebhookReorderedDeliveryIsReleasedAfterTheHold(t *testing.T) {
	ep := newEndpoint(t)
	f := providersim.DefaultFaults()
	f.WebhookReorderRate, f.WebhookDelay = 1, time.Minute
	h := start(t, providersim.Config{WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret, Faults: f})
	if _, err := h.client().V1PaymentIntents.Create(t.Context(), &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(1), Currency: stripe.String("usd")}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	eventually(t, "held webhook", func() bool { return ep.count() == 1 })
}

func TestWebhookDelayWaitsOnTheClock(t *testing.T) {
	ep := newEndpoint(t)
	f := providersim.DefaultFaults()
	f.WebhookDelayRate, f.WebhookDelay = 1, time.Minute
	h := start(t, providersim.Config{WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret, Faults: f})
	pi := h.mustCreate(h.client(), providersim.PaymentMethodVisa, 100, "late")
	h.clock.Advance(59 * time.Second)
	if err := h.srv.SetFaults(providersim.DefaultFaults()); err != nil {
		t.Fatal(err)
	}
	if err := h.srv.ForceStatus(pi.ID, providersim.StatusCanceled, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "barrier", func() bool { return ep.count() == 1 })
	if st := h.srv.Stats(); st.WebhooksDelayed != 3 || st.WebhooksPending != 3 {
		t.Fatalf("before the delay: %+v", st)
	}
	h.clock.Advance(time.Second)
	eventually(t, "delayed webhooks", func() bool { return ep.count() == 4 })
}

func TestWebhookFaultsAreReproducibleUnderOneSeed(t *testing.T) {
	f := providersim.DefaultFaults()
	f.WebhookDropRate, f.WebhookDuplicateRate, f.WebhookDelayRate, f.WebhookReorderRate = 0.3, 0.3, 0.3, 0.3
	run := func(seed uint64) providersim.Stats {
		ep := newEndpoint(t)
		h := start(t, providersim.Config{Seed: seed, Faults: f, WebhookEndpoints: []string{ep.ts.URL}, WebhookSecret: secret})
		outcomes(t, h, 20)
		st := h.srv.Stats()
		return providersim.Stats{WebhooksDropped: st.WebhooksDropped, WebhooksDuplicated: st.WebhooksDuplicated,
			WebhooksDelayed: st.WebhooksDelayed, WebhooksReordered: st.WebhooksReordered}
	}
	a, b := run(3), run(3)
	if a != b {
		t.Fatalf("same seed, different webhook faults:\n%+v\n%+v", a, b)
	}
	if a.WebhooksDropped == 0 || a.WebhooksDuplicated == 0 || a.WebhooksDelayed == 0 || a.WebhooksReordered == 0 {
		t.Fatalf("want every webhook fault to fire at 30%% over 60 events: %+v", a)
	}
	if c := run(4); c == a {
		t.Fatalf("seeds 3 and 4 gave identical webhook faults %+v", a)
	}
}

func TestForceStatusCreatesSilentDrift(t *testing.T) {
	h := start(t, providersim.Config{Admin: true})
	sc := h.client()
	pi := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "drift")
	before := h.srv.Stats().EventsCreated
	code, _ := h.do(http.MethodPost, "/__admin/force", `{"id":"`+pi.ID+`","status":"canceled"}`, map[string]string{"Content-Type": "application/json"})
	if code != 200 {
		t.Fatalf("force answered %d", code)
	}
	got, err := sc.V1PaymentIntents.Retrieve(t.Context(), pi.ID, nil)
	if err != nil || got.Status != stripe.PaymentIntentStatusCanceled {
		t.Fatalf("after force: %v %v", err, got)
	}
	if h.srv.Stats().EventsCreated != before {
		t.Fatal("a silent force emitted an event")
	}
	if code, _ := h.do(http.MethodPost, "/__admin/force", `{"id":"pi_nope","status":"canceled"}`, map[string]string{"Content-Type": "application/json"}); code != 400 {
		t.Fatalf("forcing an unknown payment answered %d", code)
	}
}

func TestAdminAPIChangesFaultsAtRuntime(t *testing.T) {
	h := start(t, providersim.Config{Admin: true})
	code, body := h.do(http.MethodPost, "/__admin/faults", url.Values{"5xx-rate": {"1"}, "latency": {"0s"}}.Encode(), nil)
	if code != 200 || body["5xx-rate"] != "1" {
		t.Fatalf("set faults: %d %v", code, body)
	}
	if _, err := h.create(h.client(), providersim.PaymentMethodVisa, 100, "a"); stripeErr(t, err).HTTPStatusCode != 500 {
		t.Fatal("5xx-rate=1 did not answer 500")
	}
	code, body = h.do(http.MethodPost, "/__admin/faults", `{"5xx-rate": 0, "processing-rate": 2}`, map[string]string{"Content-Type": "application/json"})
	if code != 400 || !strings.Contains(fmt.Sprint(body["error"]), "processing-rate") {
		t.Fatalf("out-of-range knob: %d %v", code, body)
	}
	if h.srv.Faults().ServerErrorRate != 1 {
		t.Fatal("a refused change was partly applied")
	}
	code, body = h.do(http.MethodPost, "/__admin/faults", `{"5xx-rate": 0}`, map[string]string{"Content-Type": "application/json"})
	if code != 200 || body["5xx-rate"] != "0" {
		t.Fatalf("reset: %d %v", code, body)
	}
	h.mustCreate(h.client(), providersim.PaymentMethodVisa, 100, "b")
	code, body = h.do(http.MethodGet, "/__admin/stats", "", nil)
	if code != 200 || body["injected_5xx"] != float64(1) {
		t.Fatalf("stats: %d %v", code, body)
	}
	if code, _ := h.do(http.MethodPost, "/__admin/faults", `{"nonsense": 1}`, map[string]string{"Content-Type": "application/json"}); code != 400 {
		t.Fatalf("unknown knob answered %d", code)
	}
}

func TestAdminAPIIsOffByDefault(t *testing.T) {
	h := start(t, providersim.Config{})
	code, body := h.do(http.MethodGet, "/__admin/stats", "", nil)
	if code != 404 {
		t.Fatalf("admin without --admin answered %d %v", code, body)
	}
}

func TestFaultsApplyIsAllOrNothing(t *testing.T) {
	f := providersim.DefaultFaults()
	before := f
	err := f.Apply(map[string]string{"5xx-rate": "0.5", "processing-rate": "2"})
	if err == nil || !strings.Contains(err.Error(), "processing-rate") {
		t.Fatalf("want an error naming processing-rate, got %v", err)
	}
	if f != before {
		t.Fatalf("a refused change was partly applied: %+v", f)
	}
	if err := f.Apply(map[string]string{"latency": "-1s"}); err == nil {
		t.Fatal("negative latency accepted")
	}
	if err := f.Apply(map[string]string{"hang-rate": "0.25", "webhook-delay": "3s"}); err != nil || f.HangRate != 0.25 || f.WebhookDelay != 3*time.Second {
		t.Fatalf("valid change: %v %+v", err, f)
	}
	// Every knob reads back what it was set to.
	var g providersim.Faults
	if err := g.Apply(f.Values()); err != nil || g != f {
		t.Fatalf("Values/Apply round trip: %v\n%+v\n%+v", err, g, f)
	}
}

func TestObjectIDsAreReproducibleUnderOneSeed(t *testing.T) {
	run := func(seed uint64, reads int) []string {
		h := start(t, providersim.Config{Seed: seed})
		sc := h.client()
		a := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "a")
		for range reads { // reads and refused requests do not move the id stream
			code, _ := h.do(http.MethodGet, "/v1/payment_intents", "", nil)
			if code != 200 {
				t.Fatalf("list answered %d", code)
			}
		}
		b := h.mustCreate(sc, providersim.PaymentMethodVisa, 100, "b")
		return []string{a.ID, b.ID}
	}
	x, y, z := run(5, 0), run(5, 3), run(6, 0)
	if fmt.Sprint(x) != fmt.Sprint(y) {
		t.Fatalf("seed 5 gave %v, then %v after some reads", x, y)
	}
	if x[0] == z[0] {
		t.Fatalf("seeds 5 and 6 gave the same id %s", x[0])
	}
}

func TestFaultDrawsDoNotDependOnTheRateLimiter(t *testing.T) {
	f := providersim.DefaultFaults()
	f.ServerErrorRate = 0.5
	// Without a limit: the statuses of 12 requests.
	free := outcomes(t, start(t, providersim.Config{Seed: 9, Faults: f}), 12)
	// With a limit of 1/s: requests 2..6 are refused by the limiter, yet
	// request 7 (after a refill) still meets the 7th draw.
	h := start(t, providersim.Config{Seed: 9, Faults: f, RateLimit: 1})
	limited := outcomes(t, h, 6)
	h.clock.Advance(time.Second)
	_, err := h.create(h.client(), providersim.PaymentMethodVisa, 100, "k6")
	got := 200
	if err != nil {
		got = stripeErr(t, err).HTTPStatusCode
	}
	if limited[0] != free[0] || count(limited[1:], 429) != 5 || got != free[6] {
		t.Fatalf("free run %v; limited run %v then %d, want %d then %d", free, limited, got, free[0], free[6])
	}
}
