// Package brokersim is a stateful stand-in for a broker that speaks a subset
// of Alpaca's Broker API — accounts, cash journals, ACH and wire transfers,
// funding-wallet transfers and the journal, funding and activity SSE
// streams — and misbehaves on purpose when its Faults say so.
//
// It keeps the parts of Alpaca's semantics that money-moving code depends
// on: Idempotency-Key on journals (replay or 422), lowercase journal and
// upper-case transfer statuses, executed and COMPLETE that are not final
// (corrections and returns come later), rails without events, ULID cursors
// that resume exactly after the last event seen, bounded replays that end
// with 200, per-account ordering only, and state that survives a SIGKILL
// when a data directory is given.
package brokersim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/services/internal/sim"
)

// DefaultRateLimit is the requests per RateWindow the simulator allows.
// Alpaca does not publish its numbers; this one is low enough that a client
// meets the limit in a demo.
const DefaultRateLimit = 1000

// Config configures a Server. Zero values take the defaults named on each
// field.
type Config struct {
	// APIKey and APISecret, when set, are the only HTTP Basic credentials
	// accepted; otherwise any non-empty key is.
	APIKey, APISecret string
	// Seed feeds every random decision (ids, ULID entropy, faults).
	Seed uint64
	// Faults is the initial fault setting; see DefaultFaults.
	Faults Faults
	// RateLimit is requests per RateWindow for the whole correspondent, as
	// Alpaca counts (default DefaultRateLimit; negative disables).
	RateLimit int
	// RateWindow is the length of a rate-limit window (default 1 minute).
	RateWindow time.Duration
	// SettlementDelay is the time per settlement step of an ACH or wire
	// transfer (QUEUED → SENT_TO_CLEARING → COMPLETE) and of a
	// funding-wallet transfer (default 2s, on the Clock).
	SettlementDelay time.Duration
	// FirmAccountID is the firm account's id (default: drawn from the seed).
	FirmAccountID string
	// FirmCash is the firm account's opening cash in cents (default
	// 10,000,000.00 USD).
	FirmCash int64
	// Correspondent is stamped on funding events (default "CNCD").
	Correspondent string
	// DataDir, when set, is where state is snapshotted (state.json) and
	// restored from. Every answer and every SSE message waits until the
	// state it shows is written, so a crash forgets nothing a client was
	// told.
	DataDir string
	// SnapshotInterval is how often changes nobody waits for (scheduled
	// transitions) are written (default 200ms, real time).
	SnapshotInterval time.Duration
	// SSEBuffer is how many messages a live reader may fall behind before
	// the oldest are dropped with ": you are reading too slowly, dropped N
	// messages" (default 1000).
	SSEBuffer int
	// Heartbeat is the interval of ":heartbeat" comments on idle streams
	// (default 15s, real time).
	Heartbeat time.Duration
	// Admin enables the unauthenticated /__admin/ API.
	Admin bool
	// Clock tells the time (default: the system clock).
	Clock Clock
	// TickInterval is how often, in real time, scheduled changes are looked
	// for (default 20ms).
	TickInterval time.Duration
	// Logger receives operational logs (default: discarded).
	Logger *slog.Logger
}

// Stats counts what the simulator did, for demos and tests.
type Stats struct {
	Requests          int64 `json:"requests"`
	RateLimited       int64 `json:"rate_limited"`
	Injected429       int64 `json:"injected_429"`
	Injected5xx       int64 `json:"injected_5xx"`
	Hung              int64 `json:"hung"`
	IdempotentReplays int64 `json:"idempotent_replays"`
	IdempotencyClash  int64 `json:"idempotency_conflicts"`
	SSEDropped        int64 `json:"sse_dropped"`
	SSEDuplicated     int64 `json:"sse_duplicated"`
	SSEReordered      int64 `json:"sse_reordered"`
	SSEDisconnects    int64 `json:"sse_disconnects"`
	SSESlowDrops      int64 `json:"sse_slow_reader_drops"`
	Returns           int64 `json:"returns"`
	Corrections       int64 `json:"corrections"`
	SlowSettlements   int64 `json:"slow_settlements"`
}

// Server is a running simulator. Its background work (scheduled changes,
// snapshots) runs until Close.
type Server struct {
	cfg   Config
	clock Clock
	dice  dice
	log   *slog.Logger
	mux   *http.ServeMux
	calls *prometheus.CounterVec

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
	err    error

	mu      sync.Mutex // guards everything below
	st      *state
	faults  Faults
	stats   Stats
	window  RateWindow
	changed chan struct{} // closed (and replaced) when an event is appended
	dirty   bool
	// epoch counts snapshots taken, durable is the newest written; written
	// is closed (and replaced) when durable moves.
	epoch, durable uint64
	written        chan struct{}
	flush          chan struct{}
}

// New restores state from cfg.DataDir (if set), opens the firm account on a
// fresh start and starts the background work.
func New(cfg Config) (*Server, error) {
	if cfg.RateLimit == 0 {
		cfg.RateLimit = DefaultRateLimit
	}
	if cfg.RateWindow <= 0 {
		cfg.RateWindow = time.Minute
	}
	if cfg.SettlementDelay == 0 {
		cfg.SettlementDelay = 2 * time.Second
	}
	if cfg.FirmCash == 0 {
		cfg.FirmCash = 10_000_000_00
	}
	if cfg.Correspondent == "" {
		cfg.Correspondent = "CNCD"
	}
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = 200 * time.Millisecond
	}
	if cfg.SSEBuffer <= 0 {
		cfg.SSEBuffer = 1000
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = sim.SystemClock{}
	}
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 20 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := (&Faults{}).Apply(cfg.Faults.Values()); err != nil {
		return nil, fmt.Errorf("brokersim: %w", err)
	}
	st := newState()
	if cfg.DataDir != "" {
		var err error
		if st, err = loadState(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, clock: cfg.Clock, dice: newDice(cfg.Seed), log: cfg.Logger, calls: newCallsCounter(),
		ctx: ctx, cancel: cancel, st: st, faults: cfg.Faults, changed: make(chan struct{}),
		written: make(chan struct{}), flush: make(chan struct{}, 1)}
	if err := s.dice.Restore(st.Dice); err != nil {
		cancel()
		return nil, fmt.Errorf("%w (snapshot in %s)", err, cfg.DataDir)
	}
	if st.FirmAccount == "" {
		id := cfg.FirmAccountID
		if id == "" {
			id = s.dice.uuid()
		}
		s.openAccount(id, true, cfg.FirmCash, nil, nil)
		st.FirmAccount = id
	}
	s.routes()
	s.wg.Add(1)
	go s.runScheduler()
	if cfg.DataDir != "" {
		s.wg.Add(1)
		go s.runSnapshots()
	}
	return s, nil
}

// ServeHTTP serves the Broker API subset, /healthz and, when enabled,
// /__admin/.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close stops the background work, ends open streams and writes a final
// snapshot. Later calls return the first result.
func (s *Server) Close() error {
	s.closed.Do(func() {
		s.cancel()
		s.wg.Wait()
		s.err = s.snapshot()
	})
	return s.err
}

// FirmAccountID is the firm account, the other side of every cash journal.
func (s *Server) FirmAccountID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.FirmAccount
}

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
	return s.stats
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("POST /v1/accounts", s.api(s.createAccount))
	m.Handle("GET /v1/accounts", s.api(s.listAccounts))
	m.Handle("GET /v1/accounts/{account_id}", s.api(s.getAccount))
	m.Handle("GET /v1/trading/accounts/{account_id}/account", s.api(s.getTradingAccount))
	m.Handle("POST /v1/journals", s.api(s.createJournal))
	m.Handle("GET /v1/journals", s.api(s.listJournals))
	m.Handle("GET /v1/journals/{journal_id}", s.api(s.getJournal))
	m.Handle("DELETE /v1/journals/{journal_id}", s.api(s.deleteJournal))
	m.Handle("POST /v1/accounts/{account_id}/transfers", s.api(s.createTransfer))
	m.Handle("GET /v1/accounts/{account_id}/transfers", s.api(s.listTransfers))
	m.Handle("POST /v1beta/accounts/{account_id}/funding_wallet/withdrawal", s.api(s.createWalletWithdrawal))
	m.Handle("GET /v1beta/accounts/{account_id}/funding_wallet/transfers", s.api(s.listWalletTransfers))
	m.Handle("GET /v1beta/accounts/{account_id}/funding_wallet/transfers/{transfer_id}", s.api(s.getWalletTransfer))
	m.Handle("POST /v1beta/demo/banking/funding", s.api(s.demoWalletFunding))
	m.Handle("GET /v2/events/journals/status", s.stream(journalStream))
	m.Handle("GET /v2/events/funding/status", s.stream(fundingStream))
	m.Handle("GET /v2beta1/events/activities", s.stream(activityStream))
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	if s.cfg.Admin {
		s.adminRoutes(m)
	}
	m.Handle("/", s.api(func(r *request) response {
		return apiErr(http.StatusNotFound, 40410000, "endpoint not found")
	}))
	s.mux = m
}

// request is an authenticated API call; handlers run with s.mu held.
type request struct {
	hr   *http.Request
	body []byte
	now  time.Time
}

type response struct {
	status int
	body   []byte
	header map[string]string
}

func jsonResponse(status int, v any) response {
	b, err := json.Marshal(v)
	if err != nil {
		return apiErr(http.StatusInternalServerError, 50010000, err.Error())
	}
	return response{status: status, body: b}
}

// apiErr is Alpaca's error body: {"code": <number>, "message": "…"}.
func apiErr(status, code int, msg string) response {
	return jsonResponse(status, map[string]any{"code": code, "message": msg})
}

const maxBody = 1 << 20

// gate does what every request meets first, in this order: the rate-limit
// window (its headers go on every answer), authentication, injected latency,
// injected 429 and 5xx. It returns false after answering itself.
func (s *Server) gate(w http.ResponseWriter, hr *http.Request) bool {
	s.mu.Lock()
	s.stats.Requests++
	faults := s.faults
	limited := false
	if s.cfg.RateLimit > 0 {
		var allowed bool
		var remaining int
		var reset time.Time
		s.window, allowed, remaining, reset = TakeRate(s.window, s.cfg.RateLimit, s.cfg.RateWindow, s.clock.Now())
		h := w.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(s.cfg.RateLimit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		if !allowed {
			s.stats.RateLimited++
			limited = true
		}
	}
	s.mu.Unlock()
	// Draw every request's faults, so the n-th request meets the n-th draw
	// whatever the rate limiter (which runs on time) decides.
	inject429 := s.dice.Chance(streamRateLimit, faults.RateLimitRate)
	inject5xx := s.dice.Chance(streamServerError, faults.ServerErrorRate)
	write := func(res response, outcome string) {
		s.calls.WithLabelValues(hr.Pattern, outcome).Inc()
		writeResponse(w, res)
	}
	if limited {
		write(apiErr(http.StatusTooManyRequests, 42910000, "rate limit exceeded"), "rate_limited")
		return false
	}
	if !s.authenticate(hr) {
		w.Header().Set("WWW-Authenticate", `Basic realm="broker-sim"`)
		write(apiErr(http.StatusUnauthorized, 40110000, "request is not authorized"), "client_error")
		return false
	}
	if faults.Latency > 0 {
		t := time.NewTimer(faults.Latency)
		select {
		case <-t.C:
		case <-hr.Context().Done():
			t.Stop()
			return false
		}
	}
	if inject429 {
		s.count(func(st *Stats) { st.Injected429++ })
		write(apiErr(http.StatusTooManyRequests, 42910000, "rate limit exceeded"), "injected_rate_limit")
		return false
	}
	if inject5xx {
		s.count(func(st *Stats) { st.Injected5xx++ })
		write(apiErr(http.StatusInternalServerError, 50010000, "internal server error (injected by broker-sim)"), "injected_server_error")
		return false
	}
	return true
}

// api wraps a handler: gate, read the body, run the handler under the lock,
// then wait until the state the answer shows is written before answering.
func (s *Server) api(h func(*request) response) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		if !s.gate(w, hr) {
			return
		}
		body, err := io.ReadAll(io.LimitReader(hr.Body, maxBody))
		if err != nil {
			writeResponse(w, apiErr(http.StatusBadRequest, 40010000, "cannot read request body"))
			return
		}
		s.mu.Lock()
		hang := s.dice.Chance(streamHang, s.faults.HangRate)
		r := &request{hr: hr, body: body, now: s.clock.Now().UTC()}
		res := h(r)
		need := s.durableAfter()
		if hang {
			s.stats.Hung++
		}
		s.mu.Unlock()
		if !s.waitDurable(hr.Context(), need) {
			panic(http.ErrAbortHandler) // not written: answer nothing, as a crash would
		}
		if hang {
			s.calls.WithLabelValues(hr.Pattern, "hung").Inc()
			select {
			case <-hr.Context().Done():
			case <-s.ctx.Done():
			}
			panic(http.ErrAbortHandler)
		}
		s.calls.WithLabelValues(hr.Pattern, callOutcome(res.status)).Inc()
		writeResponse(w, res)
	})
}

func writeResponse(w http.ResponseWriter, res response) {
	for k, v := range res.header {
		w.Header().Set(k, v)
	}
	if res.body != nil {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body)
}

func (s *Server) authenticate(r *http.Request) bool {
	key, secret, ok := r.BasicAuth()
	if !ok || key == "" {
		return false
	}
	if s.cfg.APIKey != "" && (key != s.cfg.APIKey || secret != s.cfg.APISecret) {
		return false
	}
	return true
}

func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}

func newCallsCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_broker_sim_api_calls_total",
		Help: "API calls answered, by endpoint (the route pattern) and outcome: ok, client_error (4xx), " +
			"rate_limited (429), server_error (5xx), injected_rate_limit, injected_server_error, hung.",
	}, []string{"endpoint", "outcome"})
}

// Metrics is the API call counter, for the binary's /metrics registry.
func (s *Server) Metrics() prometheus.Collector { return s.calls }

func callOutcome(status int) string {
	switch {
	case status < 400:
		return "ok"
	case status == http.StatusTooManyRequests:
		return "rate_limited"
	case status < 500:
		return "client_error"
	default:
		return "server_error"
	}
}

// newID returns the next event ULID; called with s.mu held.
func (s *Server) newID(now time.Time) string {
	id := NextULID(s.st.LastULID, now, func(b []byte) { s.dice.fill(streamULID, b) })
	s.st.LastULID = id
	return id
}

// appendEvent adds an event to a stream's log and wakes its readers; called
// with s.mu held. payload receives the event's ULID and returns the JSON
// object to send.
func (s *Server) appendEvent(log *[]Event, at time.Time, accounts []string, payload func(id string) map[string]any) string {
	id := s.newID(s.clock.Now())
	b, err := json.Marshal(payload(id))
	if err != nil {
		panic(err) // payloads are maps of strings and numbers
	}
	*log = append(*log, Event{ID: id, At: at.UTC(), Accounts: accounts, Data: b})
	s.dirty = true
	close(s.changed)
	s.changed = make(chan struct{})
	return id
}

// schedule adds a job; called with s.mu held.
func (s *Server) schedule(due time.Time, kind, id string) {
	s.st.Jobs = append(s.st.Jobs, job{Due: due, Kind: kind, ID: id})
	s.dirty = true
}

// runScheduler applies due jobs until Close.
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
		s.runJobs(s.clock.Now().UTC())
		s.mu.Unlock()
	}
}

// runJobs runs every due job in due order; jobs they schedule run in the
// same pass if already due.
func (s *Server) runJobs(now time.Time) {
	for {
		best := -1
		for i, j := range s.st.Jobs {
			if !j.Due.After(now) && (best < 0 || j.Due.Before(s.st.Jobs[best].Due)) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		j := s.st.Jobs[best]
		s.st.Jobs = append(s.st.Jobs[:best], s.st.Jobs[best+1:]...)
		s.dirty = true
		// A step happens at its due time: later steps are scheduled from
		// it, so one clock jump runs a whole chain of steps.
		s.runJob(j, j.Due)
	}
}

func (s *Server) runJob(j job, now time.Time) {
	switch j.Kind {
	case jobJournalExecute:
		if jn := s.st.journals[j.ID]; jn != nil && jn.Status == JournalQueued {
			s.executeJournal(jn, now, false)
		}
	case jobJournalCorrect:
		if jn := s.st.journals[j.ID]; jn != nil && jn.Status == JournalExecuted {
			amount := jn.Amount - 1 // a correction changes the amount; a cent keeps it valid
			if amount <= 0 {
				amount = jn.Amount + 1
			}
			s.correctJournal(jn, amount, now)
		}
	case jobTransferAdvance:
		if t := s.st.transfers[j.ID]; t != nil {
			s.advanceTransfer(t, now)
		}
	case jobTransferReturn:
		if t := s.st.transfers[j.ID]; t != nil && t.Status == TransferComplete {
			s.returnTransfer(t, "R01 insufficient funds (returned by broker-sim)", now)
		}
	case jobWalletAdvance:
		if t := s.st.wallet[j.ID]; t != nil {
			s.advanceWallet(t, now)
		}
	}
}

// snapshot writes the state if it changed since the last write.
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
	var b []byte
	if err == nil {
		b, err = s.st.encode()
	}
	s.dirty = false
	s.epoch++
	epoch := s.epoch
	s.mu.Unlock()
	if err == nil {
		err = writeSnapshot(s.cfg.DataDir, b)
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

// durableAfter is the snapshot a change made so far will be in: 0 when
// nothing waits to be written. Called with s.mu held.
func (s *Server) durableAfter() uint64 {
	if s.cfg.DataDir == "" || !s.dirty {
		return 0
	}
	return s.epoch + 1
}

// waitDurable returns once snapshot need is written; false if ctx or the
// server ends first. Whoever waits at once shares one write.
func (s *Server) waitDurable(ctx context.Context, need uint64) bool {
	for {
		s.mu.Lock()
		done, written := s.durable >= need, s.written
		s.mu.Unlock()
		if done {
			return true
		}
		select {
		case s.flush <- struct{}{}:
		default:
		}
		select {
		case <-written:
		case <-ctx.Done():
			return false
		case <-s.ctx.Done():
			return false
		}
	}
}

// runSnapshots writes a snapshot when someone waits for one, and at
// SnapshotInterval for changes nobody waits for.
func (s *Server) runSnapshots() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.SnapshotInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.flush:
		case <-tick.C:
		}
		if err := s.snapshot(); err != nil {
			s.log.Error("brokersim: snapshot failed", "err", err)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}
