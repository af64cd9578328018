package providersim_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/services/providersim"
	"github.com/stripe/stripe-go/v84"
)

const testKey = "sk_test_concord"

// epoch is a recent whole second, so signatures made on the manual clock
// are within stripe-go's tolerance of the real clock.
func epoch() time.Time { return time.Now().Truncate(time.Second) }

type harness struct {
	t     *testing.T
	cfg   providersim.Config
	srv   *providersim.Server
	ts    *httptest.Server
	clock *providersim.ManualClock
}

// start runs a simulator in-process on a manual clock. Unless cfg says
// otherwise there is no rate limit and no fault.
func start(t *testing.T, cfg providersim.Config) *harness {
	t.Helper()
	h := &harness{t: t}
	if cfg.Clock == nil {
		h.clock = providersim.NewManualClock(epoch())
		cfg.Clock = h.clock
	} else {
		h.clock, _ = cfg.Clock.(*providersim.ManualClock)
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 2 * time.Millisecond
	}
	if cfg.Faults == (providersim.Faults{}) {
		cfg.Faults = providersim.DefaultFaults()
	}
	h.cfg = cfg
	srv, err := providersim.New(cfg)
	if err != nil {
		t.Fatalf("starting simulator: %v", err)
	}
	h.srv = srv
	h.ts = httptest.NewServer(srv)
	t.Cleanup(h.ts.Close)
	t.Cleanup(func() { _ = srv.Close() })
	return h
}

// restart closes the simulator and starts a new one on the same config
// (and data dir) behind the same URL.
func (h *harness) restart() {
	h.t.Helper()
	if err := h.srv.Close(); err != nil {
		h.t.Fatalf("closing simulator: %v", err)
	}
	srv, err := providersim.New(h.cfg)
	if err != nil {
		h.t.Fatalf("restarting simulator: %v", err)
	}
	h.srv = srv
	h.ts.Config.Handler = srv
	h.t.Cleanup(func() { _ = srv.Close() })
}

// client is stripe-go pointed at the simulator, without its own retries.
func (h *harness) client() *stripe.Client {
	return h.clientWith(testKey, &http.Client{Timeout: 5 * time.Second})
}

func (h *harness) clientWith(key string, hc *http.Client) *stripe.Client {
	b := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(h.ts.URL), HTTPClient: hc, MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return stripe.NewClient(key, stripe.WithBackends(b))
}

// post sends a raw form request and decodes the JSON answer.
func (h *harness) do(method, path, body string, hdr map[string]string) (int, map[string]any) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.ts.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		h.t.Fatalf("%s %s: answer %d is not JSON: %q", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

func (h *harness) create(sc *stripe.Client, pm string, amount int64, key string) (*stripe.PaymentIntent, error) {
	p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(amount), Currency: stripe.String("eur"),
		PaymentMethod: stripe.String(pm), Confirm: stripe.Bool(true)}
	p.AddMetadata("order_id", "ord_"+key)
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return sc.V1PaymentIntents.Create(h.t.Context(), p)
}

func (h *harness) mustCreate(sc *stripe.Client, pm string, amount int64, key string) *stripe.PaymentIntent {
	h.t.Helper()
	pi, err := h.create(sc, pm, amount, key)
	if err != nil {
		h.t.Fatalf("creating payment (%s, key %q): %v", pm, key, err)
	}
	return pi
}

func stripeErr(t *testing.T, err error) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	if !errors.As(err, &se) {
		t.Fatalf("want a *stripe.Error, got %T: %v", err, err)
	}
	return se
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-poll.C:
		}
	}
}

// endpoint is a webhook receiver that records deliveries in arrival order.
type endpoint struct {
	mu       sync.Mutex
	bodies   [][]byte
	headers  []string
	failType string    // answer 500 to deliveries of this event type…
	failures int       // …this many times
	attempts []attempt // every delivery attempt, failed or not
	ts       *httptest.Server
}

type attempt struct {
	typ string
	sig string
	ok  bool
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{}
	e.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var d delivered
		_ = json.Unmarshal(b, &d)
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.failures > 0 && (e.failType == "" || e.failType == d.Type) {
			e.failures--
			e.attempts = append(e.attempts, attempt{d.Type, r.Header.Get("Stripe-Signature"), false})
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		e.attempts = append(e.attempts, attempt{d.Type, r.Header.Get("Stripe-Signature"), true})
		e.bodies = append(e.bodies, b)
		e.headers = append(e.headers, r.Header.Get("Stripe-Signature"))
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(e.ts.Close)
	return e
}

type delivered struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Data struct {
		Object struct {
			ID string `json:"id"`
		} `json:"object"`
	} `json:"data"`
}

func (e *endpoint) received() []delivered {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]delivered, 0, len(e.bodies))
	for _, b := range e.bodies {
		var d delivered
		_ = json.Unmarshal(b, &d)
		out = append(out, d)
	}
	return out
}

func (e *endpoint) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.bodies)
}

func form(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Add(kv[i], kv[i+1])
	}
	return v.Encode()
}

func asStripe(err error, target **stripe.Error) bool { return errors.As(err, target) }

// attemptsOf returns the attempts to deliver events of type typ.
func (e *endpoint) attemptsOf(typ string) []attempt {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []attempt
	for _, a := range e.attempts {
		if a.typ == typ {
			out = append(out, a)
		}
	}
	return out
}
