// Package providersim is a stateful stand-in for a payment provider that
// speaks a subset of Stripe's REST API (PaymentIntents, Refunds, Events and
// signed webhooks) and misbehaves on purpose when its Faults say so.
//
// It is honest about the parts of Stripe's semantics that money-moving code
// depends on: idempotency keys replay the first answer and refuse reuse with
// other parameters, lists paginate newest-first with stable cursors, every
// state change is an Event, webhooks are signed and retried, and state
// survives a restart when a data directory is given.
package providersim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/internal/sim"
)

// DefaultAPIVersion is the API version stamped on events unless
// Config.APIVersion says otherwise. It matches the stripe-go major the
// gateway uses, whose webhook verification rejects other release trains.
const DefaultAPIVersion = "2026-02-25.clover"

// DefaultHoldExpiry is how long Stripe keeps a card authorization
// capturable by default.
const DefaultHoldExpiry = 7 * 24 * time.Hour

// DefaultRateLimit is Stripe's test-mode rate limit: requests per second
// per API key.
const DefaultRateLimit = 25

// Config configures a Server. Zero values take the defaults named on each
// field.
type Config struct {
	// APIKey, when set, is the only secret key accepted. Otherwise any
	// "sk_test_…" key is accepted; each key has its own idempotency
	// records and rate limit, while objects are shared by all keys.
	APIKey string
	// Seed feeds every random decision (ids and faults).
	Seed uint64
	// Faults is the initial fault setting; see DefaultFaults.
	Faults Faults
	// RateLimit is requests per second per API key; 0 disables the limit.
	// The burst equals the rate (at least 1).
	RateLimit float64
	// HoldExpiry is how long an authorization hold (capture_method=manual)
	// can be captured; after it the provider cancels the PaymentIntent
	// (cancellation_reason "automatic", events charge.expired and
	// payment_intent.canceled) and a capture is refused with
	// charge_expired_for_capture. Default 7 days, as on Stripe; tests set
	// seconds.
	HoldExpiry time.Duration
	// IdempotencyTTL is how long an Idempotency-Key is remembered
	// (default 24h, as on Stripe).
	IdempotencyTTL time.Duration
	// DataDir, when set, is where state is snapshotted (state.json) and
	// restored from on start. Every answer and every webhook waits until
	// the state it shows is written, so a crash forgets nothing a client
	// was told.
	DataDir string
	// SnapshotInterval is how often changes nobody waits for (scheduled
	// transitions) are written (default 200ms, real time). Close always
	// writes a final snapshot.
	SnapshotInterval time.Duration
	// WebhookEndpoints receive the events WebhookEvents enables, signed
	// with WebhookSecret.
	WebhookEndpoints []string
	// WebhookEvents are the event types sent to the endpoints, like a
	// Stripe webhook endpoint's enabled_events; empty or "*" sends all.
	// Every event is still recorded and listed by the Events API.
	WebhookEvents []string
	// WebhookSecret signs webhook payloads (Stripe's whsec_… secret).
	WebhookSecret string
	// WebhookMaxAttempts is how many times a delivery is tried before it
	// is given up (default 8).
	WebhookMaxAttempts int
	// WebhookBackoff is the wait before the first retry; it doubles per
	// attempt up to WebhookMaxBackoff (defaults 1s and 5m, on the Clock).
	WebhookBackoff    time.Duration
	WebhookMaxBackoff time.Duration
	// WebhookTimeout bounds one delivery attempt (default 10s, real time).
	WebhookTimeout time.Duration
	// WebhookConcurrency is how many deliveries may be in flight at once
	// (default 1: one at a time, in event order). Stripe itself sends
	// concurrently and promises no order; more than one makes deliveries
	// overlap and arrive out of order, and lets an endpoint take webhooks
	// as fast as payments happen.
	WebhookConcurrency int
	// HTTPClient sends webhooks (default: a client with WebhookTimeout).
	HTTPClient *http.Client
	// APIVersion is stamped on events (default DefaultAPIVersion).
	APIVersion string
	// Admin enables the /__admin/ API (faults, force, stats).
	Admin bool
	// Clock tells the time (default: the system clock).
	Clock Clock
	// TickInterval is how often, in real time, the simulator looks for due
	// scheduled transitions and webhook deliveries (default 20ms).
	TickInterval time.Duration
	// Logger receives operational logs (default: discarded).
	Logger *slog.Logger
}

// Stats counts what the simulator did, for demos and tests.
type Stats struct {
	Requests           int64 `json:"requests"`
	RateLimited        int64 `json:"rate_limited"`
	Injected429        int64 `json:"injected_429"`
	Injected5xx        int64 `json:"injected_5xx"`
	Hung               int64 `json:"hung"`
	IdempotentReplays  int64 `json:"idempotent_replays"`
	EventsCreated      int64 `json:"events_created"`
	WebhooksSent       int64 `json:"webhooks_sent"`
	WebhookFailures    int64 `json:"webhook_failures"`
	WebhooksGivenUp    int64 `json:"webhooks_given_up"`
	WebhooksDropped    int64 `json:"webhooks_dropped"`
	WebhooksDuplicated int64 `json:"webhooks_duplicated"`
	WebhooksReordered  int64 `json:"webhooks_reordered"`
	WebhooksDelayed    int64 `json:"webhooks_delayed"`
	WebhooksPending    int64 `json:"webhooks_pending"`
	ProcessingHeld     int64 `json:"processing_held"`
	LateReversals      int64 `json:"late_reversals"`
	HoldsExpired       int64 `json:"holds_expired"`
	ForcedStatuses     int64 `json:"forced_statuses"`
}

// Server is a running simulator. Its background work (scheduled
// transitions, webhook delivery, snapshots) runs until Close.
type Server struct {
	cfg   Config
	clock Clock
	dice  dice
	log   *slog.Logger
	mux   *http.ServeMux
	wake  chan struct{}
	calls *prometheus.CounterVec

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  sync.Once
	err     error
	drain   chan struct{} // closed by Drain: hung requests give up
	drained sync.Once

	mu     sync.Mutex // guards everything below
	st     *state
	faults Faults
	stats  Stats
	dirty  bool
	// epoch counts the snapshots taken, durable is the newest written;
	// written is closed (and replaced) when durable moves. See durable.go.
	epoch, durable uint64
	written        chan struct{}
	flush          chan struct{} // asks runSnapshots for a snapshot now
	limiters       map[string]*rate.Limiter
	hooks          webhookQueue
}

// New restores state from cfg.DataDir (if set) and starts the background
// work. It fails if the snapshot exists but cannot be read, or a knob is out
// of range.
func New(cfg Config) (*Server, error) {
	if cfg.IdempotencyTTL == 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.HoldExpiry == 0 {
		cfg.HoldExpiry = DefaultHoldExpiry
	}
	if cfg.HoldExpiry < 0 {
		return nil, fmt.Errorf("providersim: hold expiry %v is negative", cfg.HoldExpiry)
	}
	if cfg.SnapshotInterval == 0 {
		cfg.SnapshotInterval = 200 * time.Millisecond
	}
	if cfg.WebhookMaxAttempts == 0 {
		cfg.WebhookMaxAttempts = 8
	}
	if cfg.WebhookBackoff == 0 {
		cfg.WebhookBackoff = time.Second
	}
	if cfg.WebhookMaxBackoff == 0 {
		cfg.WebhookMaxBackoff = 5 * time.Minute
	}
	if cfg.WebhookTimeout == 0 {
		cfg.WebhookTimeout = 10 * time.Second
	}
	if cfg.WebhookConcurrency <= 0 {
		cfg.WebhookConcurrency = 1
	}
	if cfg.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.WebhookConcurrency // keep one connection per delivery slot
		cfg.HTTPClient = &http.Client{Timeout: cfg.WebhookTimeout, Transport: kit.HTTPTransport(tr)}
	}
	if cfg.APIVersion == "" {
		cfg.APIVersion = DefaultAPIVersion
	}
	if cfg.Clock == nil {
		cfg.Clock = sim.SystemClock{}
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 20 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RateLimit < 0 {
		return nil, fmt.Errorf("providersim: rate limit %v is negative", cfg.RateLimit)
	}
	if err := (&Faults{}).Apply(cfg.Faults.Values()); err != nil {
		return nil, fmt.Errorf("providersim: %w", err)
	}
	if len(cfg.WebhookEndpoints) > 0 && cfg.WebhookSecret == "" {
		return nil, errors.New("providersim: webhook endpoints need a webhook secret")
	}
	if err := CheckWebhookEvents(cfg.WebhookEvents); err != nil {
		return nil, err
	}
	st := newState()
	if cfg.DataDir != "" {
		var err error
		if st, err = loadState(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{calls: newCallsCounter(),
		cfg: cfg, clock: cfg.Clock, dice: newDice(cfg.Seed), log: cfg.Logger,
		wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, drain: make(chan struct{}),
		st: st, faults: cfg.Faults, limiters: make(map[string]*rate.Limiter),
		written: make(chan struct{}), flush: make(chan struct{}, 1),
	}
	if err := s.dice.Restore(st.Dice); err != nil {
		cancel()
		return nil, fmt.Errorf("%w (snapshot in %s)", err, cfg.DataDir)
	}
	s.routes()
	s.wg.Add(2)
	go s.runScheduler()
	go s.runDispatcher()
	if cfg.DataDir != "" {
		s.wg.Add(1)
		go s.runSnapshots()
	}
	return s, nil
}

// ServeHTTP serves the Stripe subset, /healthz and, when enabled, /__admin/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the background work, releases hung requests and writes a
// final snapshot. Webhooks still queued are not persisted. It is safe to
// call more than once; later calls return the first result.
func (s *Server) Close() error {
	s.closed.Do(func() {
		s.Drain()
		s.cancel()
		s.wg.Wait()
		s.err = s.snapshot()
	})
	return s.err
}

// Drain aborts requests held by the hang fault, now and from now on, so an
// HTTP server's graceful shutdown does not wait for them. Everything else
// keeps working until Close.
func (s *Server) Drain() { s.drained.Do(func() { close(s.drain) }) }

// Faults returns the current fault setting.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// SetFaults replaces the fault setting; it takes effect for the next draw.
func (s *Server) SetFaults(f Faults) error {
	if err := (&Faults{}).Apply(f.Values()); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	return nil
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.WebhooksPending = int64(len(s.hooks.pending))
	return st
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("POST /v1/payment_intents", s.api(s.createPaymentIntent))
	m.Handle("GET /v1/payment_intents", s.api(s.listPaymentIntents))
	m.Handle("GET /v1/payment_intents/{id}", s.api(s.retrievePaymentIntent))
	m.Handle("POST /v1/payment_intents/{id}/confirm", s.api(s.confirmPaymentIntent))
	m.Handle("POST /v1/payment_intents/{id}/cancel", s.api(s.cancelPaymentIntent))
	m.Handle("POST /v1/payment_intents/{id}/capture", s.api(s.capturePaymentIntent))
	m.Handle("POST /v1/refunds", s.api(s.createRefund))
	m.Handle("GET /v1/refunds", s.api(s.listRefunds))
	m.Handle("GET /v1/refunds/{id}", s.api(s.retrieveRefund))
	m.Handle("GET /v1/events", s.api(s.listEvents))
	m.Handle("GET /v1/events/{id}", s.api(s.retrieveEvent))
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	if s.cfg.Admin {
		s.adminRoutes(m)
	}
	m.Handle("/", s.api(func(r *request) response {
		return (&apiError{Status: http.StatusNotFound, Type: errTypeInvalidRequest,
			Message: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.method, r.path)}).response()
	}))
	s.mux = m
}

// request is an authenticated, parsed API call.
type request struct {
	method    string
	path      string
	pathID    string
	form      formValues
	apiKey    string
	idemKey   string
	requestID string
	now       time.Time
	trace     trace.SpanContext // the caller's span: the webhooks of the request's events join its trace
}

// api wraps a handler with what every Stripe endpoint does, in this order:
// authentication, the per-key rate limit, injected latency, injected 429
// and 5xx (before execution), form parsing, idempotency (check, execute,
// record under one lock so concurrent retries cannot both execute), then
// the hang fault (after execution) and the answer.
func (s *Server) api(h func(*request) response) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		reqID := s.dice.idFrom(streamRequestIDs, "req")
		w.Header().Set("Request-Id", reqID)
		w.Header().Set("Content-Type", "application/json")
		injected := "" // the fault that decided the answer, if any
		write := func(res response) {
			s.calls.WithLabelValues(hr.Pattern, callOutcome(res.status, injected)).Inc()
			w.WriteHeader(res.status)
			_, _ = w.Write(res.body)
		}
		s.mu.Lock()
		s.stats.Requests++
		faults := s.faults
		s.mu.Unlock()
		// Draw every request's faults first, so the n-th request meets the
		// n-th draw whatever the rate limiter (which runs on time) decides.
		inject429 := s.dice.Chance(streamRateLimit, faults.RateLimitRate)
		inject5xx := s.dice.Chance(streamServerError, faults.ServerErrorRate)
		hang := s.dice.Chance(streamHang, faults.HangRate)

		key, aerr := s.authenticate(hr)
		if aerr != nil {
			write(aerr.response())
			return
		}
		if aerr := s.limit(key); aerr != nil {
			write(aerr.response())
			return
		}
		if faults.Latency > 0 {
			t := time.NewTimer(faults.Latency)
			select {
			case <-t.C:
			case <-hr.Context().Done():
				t.Stop()
				return
			case <-s.drain:
				t.Stop()
				panic(http.ErrAbortHandler)
			}
		}
		if inject429 {
			s.count(func(st *Stats) { st.Injected429++ })
			injected = "injected_rate_limit"
			write(rateLimitError().response())
			return
		}
		if inject5xx {
			s.count(func(st *Stats) { st.Injected5xx++ })
			injected = "injected_server_error"
			write((&apiError{Status: http.StatusInternalServerError, Type: errTypeAPI,
				Message: "An unknown error occurred (injected by provider-sim)."}).response())
			return
		}
		form, ferr := parseForm(hr)
		if ferr != nil {
			write(ferr.response())
			return
		}
		r := &request{method: hr.Method, path: hr.URL.Path, pathID: hr.PathValue("id"),
			form: form, apiKey: key, requestID: reqID, trace: trace.SpanContextFromContext(hr.Context())}
		if hr.Method == http.MethodPost {
			r.idemKey = strings.TrimSpace(hr.Header.Get("Idempotency-Key"))
		}
		if r.idemKey != "" {
			w.Header().Set("Idempotency-Key", r.idemKey)
		}

		s.mu.Lock()
		r.now = s.clock.Now()
		res, replayed := s.idempotent(r, h)
		if replayed {
			s.stats.IdempotentReplays++
		}
		if hang {
			s.stats.Hung++
		}
		need := s.durableAfter()
		s.mu.Unlock()
		s.nudge()

		if hang {
			s.calls.WithLabelValues(hr.Pattern, "hung").Inc()
			select {
			case <-hr.Context().Done():
			case <-s.drain:
			}
			panic(http.ErrAbortHandler)
		}
		if !s.waitDurable(hr.Context(), need) {
			panic(http.ErrAbortHandler) // not written: answer nothing, as a crash would
		}
		if replayed {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		write(res)
	})
}

func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

// authenticate accepts "Authorization: Bearer sk_test_…" (or the key as a
// basic-auth user name, as curl -u does).
func (s *Server) authenticate(r *http.Request) (string, *apiError) {
	key := ""
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		key = strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	} else if u, _, ok := r.BasicAuth(); ok {
		key = u
	}
	if key == "" {
		return "", &apiError{Status: http.StatusUnauthorized, Type: errTypeInvalidRequest,
			Message: "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY')."}
	}
	if !strings.HasPrefix(key, "sk_test_") || (s.cfg.APIKey != "" && key != s.cfg.APIKey) {
		return "", &apiError{Status: http.StatusUnauthorized, Type: errTypeInvalidRequest,
			Message: "Invalid API Key provided: " + redactKey(key)}
	}
	return key, nil
}

func redactKey(k string) string {
	if len(k) <= 12 {
		return strings.Repeat("*", len(k))
	}
	return k[:8] + strings.Repeat("*", len(k)-12) + k[len(k)-4:]
}

// nudge wakes the webhook dispatcher without blocking.
func (s *Server) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// runScheduler applies due scheduled transitions and forgets expired
// idempotency keys until Close.
func (s *Server) runScheduler() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.TickInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		now := s.clock.Now()
		s.runJobs(now)
		s.expireIdempotency(now)
		s.expireEvents(now)
		s.mu.Unlock()
		s.nudge()
	}
}

// snapshot writes the state if it changed since the last write. The lock
// is held only to copy the state; encoding and writing happen outside it.
// The snapshot is the whole state, so its cost grows with the run: raise
// SnapshotInterval for long, heavy runs.
func (s *Server) snapshot() error {
	if s.cfg.DataDir == "" {
		return nil
	}
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	dice, err := s.dice.State()
	s.st.Dice = dice
	st := s.st.clone()
	s.dirty = false
	s.epoch++
	epoch := s.epoch
	s.mu.Unlock()
	var b []byte
	if err == nil {
		b, err = marshalState(st)
	}
	if err == nil {
		err = writeSnapshotFile(s.cfg.DataDir, b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.dirty = true
		return err
	}
	if epoch > s.durable {
		s.durable = epoch
		close(s.written)
		s.written = make(chan struct{})
	}
	return nil
}
