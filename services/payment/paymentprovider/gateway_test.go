package paymentprovider_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

type rig struct {
	sim   *providersim.Server
	clock *providersim.ManualClock
	gw    *paymentprovider.Client
	url   string
}

func newRig(t *testing.T, cfg providersim.Config, gwcfg paymentprovider.Config) *rig {
	t.Helper()
	clock := providersim.NewManualClock(time.Now().Truncate(time.Second))
	cfg.Clock, cfg.TickInterval = clock, 2*time.Millisecond
	if cfg.Faults == (providersim.Faults{}) {
		cfg.Faults = providersim.DefaultFaults()
	}
	sim, err := providersim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = sim.Close() })
	gwcfg.BaseURL = ts.URL
	if gwcfg.APIKey == "" {
		gwcfg.APIKey = "sk_test_gateway"
	}
	gw, err := paymentprovider.New(gwcfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{sim: sim, clock: clock, gw: gw, url: ts.URL}
}

func intent(key string, amount int64, pm string) paymentprovider.Intent {
	return paymentprovider.Intent{IdempotencyKey: key, Amount: amount, Currency: "eur", PaymentMethod: pm,
		Metadata: map[string]string{"payment_id": key}}
}

func TestCreateAndConfirmOutcomes(t *testing.T) {
	r := newRig(t, providersim.Config{}, paymentprovider.Config{})
	for _, tc := range []struct {
		pm   string
		want paymentprovider.Status
		code string
	}{
		{providersim.PaymentMethodVisa, paymentprovider.StatusSucceeded, ""},
		{providersim.PaymentMethodDeclined, paymentprovider.StatusDeclined, "generic_decline"},
		{providersim.PaymentMethodInsufficientFunds, paymentprovider.StatusDeclined, "insufficient_funds"},
		{providersim.PaymentMethodProcessing, paymentprovider.StatusProcessing, ""},
	} {
		t.Run(tc.pm, func(t *testing.T) {
			p, err := r.gw.CreateAndConfirm(t.Context(), intent("pay-"+tc.pm, 1500, tc.pm))
			if err != nil {
				t.Fatalf("CreateAndConfirm: %v", err)
			}
			if p.Status != tc.want || p.DeclineCode != tc.code || p.ProviderID == "" || p.Amount != 1500 || p.Metadata["payment_id"] != "pay-"+tc.pm {
				t.Fatalf("got %+v, want status %s decline %q", p, tc.want, tc.code)
			}
			got, err := r.gw.Get(t.Context(), p.ProviderID)
			if err != nil || got.Status != tc.want {
				t.Fatalf("Get: %v %+v", err, got)
			}
		})
	}
}

func TestCreateAndConfirmSendsTheIntentsIdempotencyKey(t *testing.T) {
	r := newRig(t, providersim.Config{}, paymentprovider.Config{})
	a, err := r.gw.CreateAndConfirm(t.Context(), intent("pay-1", 1000, providersim.PaymentMethodVisa))
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.gw.CreateAndConfirm(t.Context(), intent("pay-1", 1000, providersim.PaymentMethodVisa))
	if err != nil || b.ProviderID != a.ProviderID {
		t.Fatalf("second call: %v, %s vs %s", err, b.ProviderID, a.ProviderID)
	}
	if r.sim.Stats().IdempotentReplays != 1 {
		t.Fatalf("stats %+v", r.sim.Stats())
	}
	_, err = r.gw.CreateAndConfirm(t.Context(), intent("pay-1", 2000, providersim.PaymentMethodVisa))
	if !errors.Is(err, paymentprovider.ErrIdempotencyConflict) {
		t.Fatalf("same key, other amount: %v, want ErrIdempotencyConflict", err)
	}
	before := r.sim.Stats().Requests
	_, err = r.gw.CreateAndConfirm(t.Context(), intent("", 1000, providersim.PaymentMethodVisa))
	if !errors.Is(err, paymentprovider.ErrInvalidRequest) || r.sim.Stats().Requests != before {
		t.Fatalf("no key: %v (requests %d→%d); want ErrInvalidRequest without a call", err, before, r.sim.Stats().Requests)
	}
}

func TestErrorsMapToSentinels(t *testing.T) {
	cases := []struct {
		name   string
		faults func(*providersim.Faults)
		gw     paymentprovider.Config
		want   error
	}{
		{"429", func(f *providersim.Faults) { f.RateLimitRate = 1 }, paymentprovider.Config{}, paymentprovider.ErrUnavailable},
		{"5xx", func(f *providersim.Faults) { f.ServerErrorRate = 1 }, paymentprovider.Config{}, paymentprovider.ErrUnavailable},
		{"timeout", func(f *providersim.Faults) { f.HangRate = 1 }, paymentprovider.Config{Timeout: 100 * time.Millisecond}, paymentprovider.ErrUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := providersim.DefaultFaults()
			tc.faults(&f)
			r := newRig(t, providersim.Config{Faults: f}, tc.gw)
			_, err := r.gw.CreateAndConfirm(t.Context(), intent("pay-x", 1000, providersim.PaymentMethodVisa))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			// The caller retries with the same key once the provider is back;
			// after a timeout that returns the charge that did happen.
			if err := r.sim.SetFaults(providersim.DefaultFaults()); err != nil {
				t.Fatal(err)
			}
			p, err := r.gw.CreateAndConfirm(t.Context(), intent("pay-x", 1000, providersim.PaymentMethodVisa))
			if err != nil || p.Status != paymentprovider.StatusSucceeded {
				t.Fatalf("retry: %v %+v", err, p)
			}
			if n := r.sim.Stats().EventsCreated; n != 3 {
				t.Fatalf("%d events: the retry charged again or the first call left traces", n)
			}
		})
	}
	t.Run("not found", func(t *testing.T) {
		r := newRig(t, providersim.Config{}, paymentprovider.Config{})
		if _, err := r.gw.Get(t.Context(), "pi_missing"); !errors.Is(err, paymentprovider.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
		if _, err := r.gw.GetEvent(t.Context(), "evt_missing"); !errors.Is(err, paymentprovider.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		r := newRig(t, providersim.Config{}, paymentprovider.Config{})
		_, err := r.gw.CreateAndConfirm(t.Context(), paymentprovider.Intent{IdempotencyKey: "k", Amount: -1, Currency: "eur", PaymentMethod: providersim.PaymentMethodVisa})
		if !errors.Is(err, paymentprovider.ErrInvalidRequest) {
			t.Fatalf("got %v, want ErrInvalidRequest", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		gw, err := paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_x", BaseURL: "http://127.0.0.1:1", Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := gw.Get(t.Context(), "pi_1"); !errors.Is(err, paymentprovider.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
	})
}

func TestListCreatedVisitsEveryPaymentInTheWindowOnce(t *testing.T) {
	r := newRig(t, providersim.Config{}, paymentprovider.Config{})
	t0 := r.clock.Now()
	want := map[string]bool{}
	for i := range 25 {
		p, err := r.gw.CreateAndConfirm(t.Context(), intent(fmt.Sprintf("p%d", i), 100, providersim.PaymentMethodVisa))
		if err != nil {
			t.Fatal(err)
		}
		if i >= 5 && i < 20 {
			want[p.ProviderID] = true
		}
		if i == 4 || i == 19 {
			r.clock.Advance(time.Second)
		}
	}
	seen := map[string]int{}
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := r.gw.ListCreated(t.Context(), t0.Add(time.Second), t0.Add(time.Second), cursor, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Items {
			seen[p.ProviderID]++
		}
		if !page.HasMore {
			break
		}
		cursor = page.Next
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("saw %d payments, want %d", len(seen), len(want))
	}
	for id, n := range seen {
		if n != 1 || !want[id] {
			t.Fatalf("%s seen %d times (in window: %v)", id, n, want[id])
		}
	}
	if _, err := r.gw.ListCreated(t.Context(), t0, t0, "", 101); !errors.Is(err, paymentprovider.ErrInvalidRequest) {
		t.Fatalf("limit 101: %v", err)
	}
}

func TestRefundMovesPaymentOutOfSucceeded(t *testing.T) {
	r := newRig(t, providersim.Config{}, paymentprovider.Config{})
	p, err := r.gw.CreateAndConfirm(t.Context(), intent("pay-r", 800, providersim.PaymentMethodVisa))
	if err != nil {
		t.Fatal(err)
	}
	rf, err := r.gw.Refund(t.Context(), p.ProviderID, "refund-pay-r")
	if err != nil || rf.Amount != 800 || rf.PaymentID != p.ProviderID {
		t.Fatalf("refund: %v %+v", err, rf)
	}
	again, err := r.gw.Refund(t.Context(), p.ProviderID, "refund-pay-r")
	if err != nil || again.ID != rf.ID {
		t.Fatalf("refund retried with its key: %v %+v, want %s", err, again, rf.ID)
	}
	if _, err := r.gw.Refund(t.Context(), p.ProviderID, "refund-other"); !errors.Is(err, paymentprovider.ErrInvalidRequest) {
		t.Fatalf("second refund with another key: %v, want ErrInvalidRequest", err)
	}
	got, err := r.gw.Get(t.Context(), p.ProviderID)
	if err != nil || got.Status != paymentprovider.StatusRefunded || got.AmountRefunded != 800 || got.ProviderStatus != "succeeded" {
		t.Fatalf("after refund: %v %+v", err, got)
	}
	page, err := r.gw.ListCreated(t.Context(), r.clock.Now(), r.clock.Now(), "", 0)
	if err != nil || len(page.Items) != 1 || page.Items[0].Status != paymentprovider.StatusRefunded {
		t.Fatalf("list after refund: %v %+v", err, page)
	}
}

func TestListEventsFollowsEveryStateChange(t *testing.T) {
	r := newRig(t, providersim.Config{}, paymentprovider.Config{})
	t0 := r.clock.Now()
	p, err := r.gw.CreateAndConfirm(t.Context(), intent("pay-e", 100, providersim.PaymentMethodVisa))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.gw.Refund(t.Context(), p.ProviderID, "ref-e"); err != nil {
		t.Fatal(err)
	}
	for i := range 150 { // more than a page
		if _, err := r.gw.CreateAndConfirm(t.Context(), intent(fmt.Sprintf("bulk-%d", i), 100, providersim.PaymentMethodDeclined)); err != nil {
			t.Fatal(err)
		}
	}
	var types []string
	ids := map[string]bool{}
	cursor := ""
	for {
		page, err := r.gw.ListEvents(t.Context(), t0, r.clock.Now(), cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Items {
			if ids[ev.ID] {
				t.Fatalf("event %s listed twice", ev.ID)
			}
			ids[ev.ID] = true
			if ev.PaymentID == p.ProviderID {
				types = append(types, ev.Type)
			}
		}
		if !page.HasMore {
			break
		}
		cursor = page.Next
	}
	if len(ids) != 5+150*2 {
		t.Fatalf("%d events, want %d", len(ids), 5+300)
	}
	want := "[charge.refunded refund.created payment_intent.succeeded charge.succeeded payment_intent.created]"
	if fmt.Sprint(types) != want {
		t.Fatalf("events of %s newest first: %v, want %s", p.ProviderID, types, want)
	}
}

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		status           string
		declined         bool
		amount, refunded int64
		want             paymentprovider.Status
	}{
		{"succeeded", false, 100, 0, paymentprovider.StatusSucceeded},
		{"succeeded", false, 100, 40, paymentprovider.StatusSucceeded},
		{"succeeded", false, 100, 100, paymentprovider.StatusRefunded},
		{"succeeded", false, 0, 0, paymentprovider.StatusSucceeded},
		{"processing", false, 100, 0, paymentprovider.StatusProcessing},
		{"requires_payment_method", true, 100, 0, paymentprovider.StatusDeclined},
		{"requires_payment_method", false, 100, 0, paymentprovider.StatusPending},
		{"requires_confirmation", false, 100, 0, paymentprovider.StatusPending},
		{"requires_action", false, 100, 0, paymentprovider.StatusPending},
		{"requires_capture", false, 100, 0, paymentprovider.StatusAuthorized},
		{"canceled", false, 100, 0, paymentprovider.StatusCanceled},
		{"canceled", true, 100, 0, paymentprovider.StatusCanceled},
		{"something_new", false, 100, 0, paymentprovider.StatusUnknown},
	} {
		if got := paymentprovider.StatusOf(tc.status, tc.declined, tc.amount, tc.refunded); got != tc.want {
			t.Errorf("StatusOf(%s, declined=%v, %d, refunded %d) = %s, want %s", tc.status, tc.declined, tc.amount, tc.refunded, got, tc.want)
		}
	}
	if paymentprovider.StatusSucceeded.Final() || !paymentprovider.StatusRefunded.Final() || paymentprovider.StatusProcessing.Final() {
		t.Error("Final: succeeded and processing can still change; refunded cannot")
	}
}

func TestSimulatorSpeaksTheSDKsAPIVersion(t *testing.T) {
	if providersim.DefaultAPIVersion != stripe.APIVersion {
		t.Fatalf("simulator %s, stripe-go %s", providersim.DefaultAPIVersion, stripe.APIVersion)
	}
}

// Concurrent calls reuse their connections: Go's default transport keeps
// two idle connections per host, so a charger with more calls in flight
// would open and close a connection (a TLS handshake, against Stripe) for
// most of them.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	sim, err := providersim.New(providersim.Config{Faults: providersim.DefaultFaults()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	var opened atomic.Int64
	ts := httptest.NewUnstartedServer(sim)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	const inFlight, rounds = 8, 4
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_gateway", BaseURL: ts.URL, Connections: inFlight})
	if err != nil {
		t.Fatal(err)
	}
	for round := range rounds {
		var wg sync.WaitGroup
		for i := range inFlight {
			wg.Go(func() {
				if _, err := gw.CreateAndConfirm(t.Context(), intent(fmt.Sprintf("conn-%d-%d", round, i), 100, providersim.PaymentMethodVisa)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	// Each round may find a connection or two not yet back in the idle
	// pool; without reuse every round after the first opens six anew.
	if n := opened.Load(); n > inFlight+rounds {
		t.Fatalf("%d rounds of %d concurrent calls opened %d connections; want at most %d", rounds, inFlight, n, inFlight+rounds)
	}
}
