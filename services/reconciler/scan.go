package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults for ScannerConfig.
const (
	DefaultJob             = "payments-vs-provider"
	DefaultBatch           = 500
	DefaultGrace           = 10 * time.Minute
	DefaultListSkew        = 2 * time.Minute
	DefaultConcurrency     = 4
	DefaultOutageThreshold = 3
	// ListLimit is the most payments one list call returns (Stripe's cap).
	ListLimit = 100
)

// ScannerConfig configures a Scanner. Zero values take the defaults above.
type ScannerConfig struct {
	Job      string
	Store    Store
	Provider Provider
	// Lister, when set, turns on list-based verification: the rows of a
	// batch are looked up by their creation window, up to ListLimit per
	// call, and only rows the listing does not show are read one by one.
	Lister Lister
	// Batch is the number of rows per keyset page.
	Batch int
	// Grace: rows updated more recently are InFlight and not asked about,
	// because their webhook is most likely still on its way.
	Grace time.Duration
	// ListSkew widens the creation window on both sides: a row is created
	// before the provider call, the provider's object a moment later, and
	// the provider counts whole seconds.
	ListSkew time.Duration
	// Limiter paces every provider call (nil: unlimited). Give it a share
	// of the provider's rate limit so live traffic keeps the rest.
	Limiter *rate.Limiter
	// Concurrency bounds per-row calls in flight.
	Concurrency int
	// OutageThreshold: after this many unavailable answers in a row, the
	// rest of the batch is not asked (it would only burn the rate budget
	// and time on a provider that is down).
	OutageThreshold int
	Metrics         *Metrics
	Logger          *slog.Logger
}

// Scanner walks every payment in id order, a page at a time, compares it
// with the provider and records what it finds. Several scanners may run on
// one job: the cursor's compare-and-set lets exactly one record each page.
type Scanner struct {
	cfg ScannerConfig
	log *slog.Logger
}

// NewScanner checks cfg and fills in defaults.
func NewScanner(cfg ScannerConfig) (*Scanner, error) {
	if cfg.Store == nil || cfg.Provider == nil {
		return nil, errors.New("reconciler: a scanner needs a store and a provider")
	}
	if cfg.Job == "" {
		cfg.Job = DefaultJob
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Grace < 0 {
		return nil, fmt.Errorf("reconciler: grace %v is negative", cfg.Grace)
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.ListSkew <= 0 {
		cfg.ListSkew = DefaultListSkew
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.OutageThreshold <= 0 {
		cfg.OutageThreshold = DefaultOutageThreshold
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scanner{cfg: cfg, log: cfg.Logger.With("job", cfg.Job)}, nil
}

// Job is the cursor this scanner advances.
func (s *Scanner) Job() string { return s.cfg.Job }

// BatchReport says what one batch did.
type BatchReport struct {
	CursorFrom int64
	CursorTo   int64
	Scanned    int
	Counts     map[Verdict]int
	// Wrapped: the page was empty, so the cursor went back to the start
	// and the cycle was marked complete.
	Wrapped bool
	// Calls is the number of provider API calls; Observed the rows the
	// provider answered about (found or not found). Calls/Observed is the
	// cost of verifying one row.
	Calls    int
	Observed int
	RecordStats
}

// RunBatch reads one page, asks the provider about its rows outside any
// transaction, and records the results while advancing the cursor in one
// transaction.
//
// It returns an error wrapping ErrConcurrentRun if another reconciler
// recorded this page first (this batch's work is discarded; the next batch
// continues from the winner's cursor), and ErrProviderUnavailable if the
// provider answered about none of the rows it was asked about: then nothing
// is recorded and the cursor stays, so the page is retried once the
// provider is back while the lag keeps growing.
func (s *Scanner) RunBatch(ctx context.Context) (BatchReport, error) {
	page, err := s.cfg.Store.ReadPage(ctx, s.cfg.Job, s.cfg.Batch)
	if err != nil {
		return BatchReport{}, fmt.Errorf("reconciler: job %s: read page: %w", s.cfg.Job, err)
	}
	rep := BatchReport{CursorFrom: page.CursorID, CursorTo: page.CursorID, Counts: make(map[Verdict]int)}
	if len(page.Rows) == 0 {
		if err := s.cfg.Store.CompleteCycle(ctx, s.cfg.Job, page.CursorID); err != nil {
			if errors.Is(err, ErrConcurrentRun) {
				s.cfg.Metrics.concurrent()
			}
			return rep, fmt.Errorf("reconciler: job %s: complete cycle at id %d: %w", s.cfg.Job, page.CursorID, err)
		}
		rep.Wrapped, rep.CursorTo = true, 0
		return rep, nil
	}

	obs, calls := s.observe(ctx, page)
	rep.Calls = calls
	results := make([]Result, len(page.Rows))
	asked, answered := 0, 0
	for i, r := range page.Rows {
		o := obs[i]
		d := Decide(r, o, page.Now, s.cfg.Grace)
		results[i] = Result{Row: r, Decision: d, External: o.Status}
		rep.Counts[d.Verdict]++
		if o.Outcome != NotAsked || needsCall(r, page.Now, s.cfg.Grace) {
			asked++
		}
		if o.Outcome == Observed || o.Outcome == NotFound {
			answered++
		}
		if d.Verdict == NeedsReview && d.Kind == KindUnknownExternalStatus {
			s.log.Warn("reconciler: provider reported a status this version does not know; recording it for review",
				"payment_id", r.PaymentID, "provider_payment_id", r.ProviderID, "status", o.Status)
		}
	}
	rep.Scanned, rep.Observed = len(page.Rows), answered
	err = finishBatch(ctx, s.cfg.Metrics, s.cfg.Job, &rep, asked, page.Rows[len(page.Rows)-1].PaymentID,
		func() (RecordStats, error) { return s.cfg.Store.Record(ctx, page, results) })
	return rep, err
}

// finishBatch counts a batch's verdicts and records it (the cursor moving
// to last), unless ctx ended or none of the asked rows could be verified:
// then nothing is recorded and the cursor stays, so the page is retried.
func finishBatch(ctx context.Context, m *Metrics, job string, rep *BatchReport, asked int, last int64, record func() (RecordStats, error)) error {
	for v, n := range rep.Counts {
		m.verdict(v, n)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("reconciler: job %s: batch after id %d: %w", job, rep.CursorFrom, ctx.Err())
	}
	if asked > 0 && rep.Observed == 0 {
		return fmt.Errorf("reconciler: job %s: batch after id %d: none of %d rows could be verified: %w",
			job, rep.CursorFrom, asked, ErrProviderUnavailable)
	}
	stats, err := record()
	if err != nil {
		if errors.Is(err, ErrConcurrentRun) {
			m.concurrent()
		}
		return fmt.Errorf("reconciler: job %s: record batch after id %d: %w", job, rep.CursorFrom, err)
	}
	m.recorded(stats)
	rep.RecordStats = stats
	rep.CursorTo = last
	return nil
}

func needsCall(r Row, now time.Time, grace time.Duration) bool {
	return r.ProviderID != "" && !InGrace(r, now, grace)
}

// observe asks the provider about every row that needs it: by listing
// first when a Lister is configured, then one by one for what the listing
// did not show. It returns one Observation per row and the calls made.
func (s *Scanner) observe(ctx context.Context, page Page) ([]Observation, int) {
	obs := make([]Observation, len(page.Rows))
	var todo []int
	for i, r := range page.Rows {
		if needsCall(r, page.Now, s.cfg.Grace) {
			todo = append(todo, i)
		}
	}
	calls := 0
	if s.cfg.Lister != nil && len(todo) > 1 {
		var n int
		todo, n = s.observeByList(ctx, page.Rows, todo, obs)
		calls += n
	}
	calls += s.observeEach(ctx, page.Rows, todo, obs)
	return obs, calls
}

// observeByList lists the provider's payments created in the batch's
// window and fills in every row it finds. It stops when all rows are found,
// the window is exhausted, or it has spent twice the calls the batch should
// need (a window crowded by other payments at the provider would otherwise
// cost more than asking row by row). It returns the rows still unknown.
func (s *Scanner) observeByList(ctx context.Context, rows []Row, todo []int, obs []Observation) ([]int, int) {
	want := make(map[string]int, len(todo))
	lo, hi := rows[todo[0]].CreatedAt, rows[todo[0]].CreatedAt
	for _, i := range todo {
		want[rows[i].ProviderID] = i
		if c := rows[i].CreatedAt; c.Before(lo) {
			lo = c
		} else if c.After(hi) {
			hi = c
		}
	}
	gte, lte := lo.Add(-s.cfg.ListSkew), hi.Add(s.cfg.ListSkew)
	budget := 2*((len(todo)+ListLimit-1)/ListLimit) + 1
	calls, after := 0, ""
	for len(want) > 0 && calls < budget {
		if err := s.wait(ctx); err != nil {
			break
		}
		calls++
		p, err := s.cfg.Lister.ListCreated(ctx, gte, lte, after)
		if err != nil {
			s.cfg.Metrics.call("list", outcomeOf(err))
			s.log.Warn("reconciler: list by creation window failed; asking row by row",
				"from", gte, "to", lte, "err", err)
			break
		}
		s.cfg.Metrics.call("list", "ok")
		for _, e := range p.Items {
			if i, ok := want[e.ProviderID]; ok {
				obs[i] = Observation{Outcome: Observed, Status: e.Status}
				delete(want, e.ProviderID)
			}
		}
		if !p.HasMore || p.Next == "" {
			break
		}
		after = p.Next
	}
	var rest []int
	for _, i := range todo {
		if obs[i].Outcome == NotAsked {
			rest = append(rest, i)
		}
	}
	return rest, calls
}

// observeEach asks about rows one by one with bounded concurrency. After
// OutageThreshold unavailable answers in a row it stops asking: the rows
// left stay NotAsked (Unverifiable).
func (s *Scanner) observeEach(ctx context.Context, rows []Row, todo []int, obs []Observation) int {
	var (
		mu          sync.Mutex
		calls       int
		consecutive int
		wg          sync.WaitGroup
		sem         = make(chan struct{}, s.cfg.Concurrency)
	)
	down := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return consecutive >= s.cfg.OutageThreshold
	}
	for _, i := range todo {
		// Take the slot first: with one slot this waits for the previous
		// answer, so an outage stops the batch after exactly
		// OutageThreshold calls.
		sem <- struct{}{}
		if down() || ctx.Err() != nil {
			<-sem
			break
		}
		if err := s.wait(ctx); err != nil {
			<-sem
			break
		}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			r := rows[i]
			e, err := s.cfg.Provider.Get(ctx, r.ProviderID)
			o := Observation{Outcome: Observed, Status: e.Status}
			switch {
			case err == nil:
			case errors.Is(err, ErrProviderNotFound):
				o = Observation{Outcome: NotFound}
			default:
				o = Observation{Outcome: Unavailable}
				s.log.Warn("reconciler: provider unavailable", "payment_id", r.PaymentID,
					"provider_payment_id", r.ProviderID, "err", err)
			}
			s.cfg.Metrics.call("get", outcomeOf(err))
			mu.Lock()
			calls++
			obs[i] = o
			if o.Outcome == Unavailable {
				consecutive++
			} else {
				consecutive = 0
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	return calls
}

func (s *Scanner) wait(ctx context.Context) error {
	if s.cfg.Limiter == nil {
		return ctx.Err()
	}
	return s.cfg.Limiter.Wait(ctx)
}

func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrProviderNotFound):
		return "not_found"
	default:
		return "unavailable"
	}
}

// CycleReport sums the batches of one full cycle.
type CycleReport struct {
	Batches    int
	Duration   time.Duration
	Counts     map[Verdict]int
	Calls      int
	Observed   int
	Concurrent int // batches lost to another reconciler
	RecordStats
}

// CallsPerVerifiedRow is the provider cost of verifying one row.
func (c CycleReport) CallsPerVerifiedRow() float64 {
	if c.Observed == 0 {
		return 0
	}
	return float64(c.Calls) / float64(c.Observed)
}

func (c *CycleReport) add(b BatchReport) {
	c.Batches++
	if c.Counts == nil {
		c.Counts = make(map[Verdict]int)
	}
	for v, n := range b.Counts {
		c.Counts[v] += n
	}
	c.Calls += b.Calls
	c.Observed += b.Observed
	c.RecordStats.add(b.RecordStats)
}

// RunCycle runs batches until the cursor wraps: from wherever the cursor
// is to the end of the table. A batch lost to a concurrent run is counted
// and the scan continues from the winner's cursor. A provider outage ends
// the cycle early with an error wrapping ErrProviderUnavailable.
func (s *Scanner) RunCycle(ctx context.Context) (CycleReport, error) {
	return runCycle(ctx, s.cfg.Metrics, s.RunBatch)
}

// runCycle runs batch until the cursor wraps (see Scanner.RunCycle).
func runCycle(ctx context.Context, m *Metrics, batch func(context.Context) (BatchReport, error)) (CycleReport, error) {
	start := time.Now()
	var rep CycleReport
	for {
		b, err := batch(ctx)
		rep.add(b)
		rep.Duration = time.Since(start)
		switch {
		case errors.Is(err, ErrConcurrentRun):
			rep.Concurrent++
			continue
		case err != nil:
			return rep, err
		case b.Wrapped:
			m.cycle(rep.Duration)
			return rep, nil
		}
	}
}

// Run scans until ctx ends, pausing idle between cycles and backoff after
// a provider outage. Concurrent runs are expected when several replicas run
// and are only logged.
func (s *Scanner) Run(ctx context.Context, idle, backoff time.Duration) error {
	return runLoop(ctx, idle, backoff, s.log, func(ctx context.Context) (CycleReport, []any, error) {
		rep, err := s.RunCycle(ctx)
		return rep, nil, err
	})
}

// runLoop runs cycle until ctx ends, pausing idle between cycles and
// backoff after a failed one; extra are more fields for the cycle's log.
func runLoop(ctx context.Context, idle, backoff time.Duration, log *slog.Logger,
	cycle func(context.Context) (rep CycleReport, extra []any, err error)) error {
	for {
		rep, extra, err := cycle(ctx)
		wait := idle
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrProviderUnavailable):
			log.Warn("reconciler: provider unavailable; backing off", "backoff", backoff, "err", err)
			wait = backoff
		case err != nil:
			log.Error("reconciler: cycle failed", "err", err)
			wait = backoff
		default:
			log.Info("reconciler: cycle complete", append([]any{"duration", rep.Duration, "batches", rep.Batches,
				"verdicts", rep.Counts, "findings_opened", rep.FindingsOpened,
				"commands", rep.CommandsEmitted, "calls", rep.Calls, "calls_per_verified_row", rep.CallsPerVerifiedRow(),
				"concurrent", rep.Concurrent}, extra...)...)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
