package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/time/rate"
)

// DefaultHealWindow is how far back a scheduled heal re-reads: longer than
// the longest outage we expect to sit through (a weekend), so a webhook lost
// to any outage we recover from is still inside the next window.
const DefaultHealWindow = 72 * time.Hour

// HealerConfig configures a Healer.
type HealerConfig struct {
	Store    Store
	Events   EventLister
	Provider Provider // reads payments whose events carry no payment object
	Grace    time.Duration
	Limiter  *rate.Limiter
	Metrics  *Metrics
	Logger   *slog.Logger
	// Chunk is how many payments are classified and recorded per
	// transaction (default 500).
	Chunk int
}

// Healer is the windowed re-pull: it re-reads the provider's events for a
// time window, keeps the latest known state of every payment they touch, and
// feeds it through the same Decide → finding → repair command path as the
// scan. It keeps no state of its own: findings are recorded once (the open
// finding index) and commands only with a new finding, so re-running a
// window is safe and converges.
type Healer struct {
	cfg HealerConfig
	log *slog.Logger
}

// NewHealer checks cfg and fills in defaults.
func NewHealer(cfg HealerConfig) (*Healer, error) {
	if cfg.Store == nil || cfg.Events == nil || cfg.Provider == nil {
		return nil, errors.New("reconciler: a healer needs a store, an event lister and a provider")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Chunk <= 0 {
		cfg.Chunk = 500
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Healer{cfg: cfg, log: cfg.Logger}, nil
}

// HealReport says what a heal did.
type HealReport struct {
	Since, Until time.Time
	Events       int
	Pages        int
	Payments     int // distinct provider payments the events touched
	Unknown      int // of those, payments with no local row
	Calls        int
	Counts       map[Verdict]int
	RecordStats
}

// Heal re-reads the provider's events created in [since, until].
//
// Events come newest first, so the first event seen for a payment carries
// its latest state in the window. Events without the payment object
// (refunds, charges) make the healer read the payment itself, and so does
// any drift a snapshot suggests: a finding or command is only ever based on
// a fresh read, so the cost is one list call per 100 events plus one read
// per drifting payment.
func (h *Healer) Heal(ctx context.Context, since, until time.Time) (HealReport, error) {
	rep := HealReport{Since: since, Until: until, Counts: make(map[Verdict]int)}
	if !until.After(since) {
		return rep, fmt.Errorf("reconciler: heal window %s..%s is empty", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	latest := make(map[string]*External)
	var order []string
	after := ""
	for {
		if err := h.wait(ctx); err != nil {
			return rep, err
		}
		rep.Calls++
		page, err := h.cfg.Events.ListEvents(ctx, since, until, after)
		if err != nil {
			h.cfg.Metrics.call("list_events", outcomeOf(err))
			return rep, fmt.Errorf("reconciler: heal %s..%s: list events after %q: %w",
				since.Format(time.RFC3339), until.Format(time.RFC3339), after, err)
		}
		h.cfg.Metrics.call("list_events", "ok")
		rep.Pages++
		for _, ev := range page.Events {
			rep.Events++
			if ev.ProviderID == "" {
				continue
			}
			// Only the newest event of a payment counts: an older snapshot
			// behind a newer refund or charge event would be stale.
			if _, seen := latest[ev.ProviderID]; !seen {
				order = append(order, ev.ProviderID)
				latest[ev.ProviderID] = ev.Snapshot
			}
		}
		if !page.HasMore || page.Next == "" {
			break
		}
		after = page.Next
	}
	rep.Payments = len(order)
	for start := 0; start < len(order); start += h.cfg.Chunk {
		end := min(start+h.cfg.Chunk, len(order))
		if err := h.healChunk(ctx, order[start:end], latest, &rep); err != nil {
			return rep, err
		}
	}
	h.cfg.Metrics.unknownRecord(rep.Unknown)
	return rep, nil
}

func (h *Healer) healChunk(ctx context.Context, ids []string, latest map[string]*External, rep *HealReport) error {
	rows, now, err := h.cfg.Store.RowsByProviderID(ctx, ids)
	if err != nil {
		return fmt.Errorf("reconciler: heal: %w", err)
	}
	known := make(map[string]bool, len(rows))
	results := make([]Result, 0, len(rows))
	for _, r := range rows {
		known[r.ProviderID] = true
		obs, fresh := Observation{}, false
		if InGrace(r, now, h.cfg.Grace) {
			// Decide answers InFlight without looking.
		} else if snap := latest[r.ProviderID]; snap != nil {
			obs = Observation{Outcome: Observed, Status: snap.Status}
		} else {
			obs, fresh = h.get(ctx, r, rep), true
		}
		d := Decide(r, obs, now, h.cfg.Grace)
		if !fresh && d.Kind != "" {
			// An event's snapshot is the payment as it was then, not as it
			// is (a change without an event, a refund after the window).
			// Drift is rare, so confirm it with a fresh read before it
			// becomes a finding or a command.
			obs, fresh = h.get(ctx, r, rep), true
			d = Decide(r, obs, now, h.cfg.Grace)
		}
		if !fresh {
			// In sync or in flight by an old snapshot: nothing to record,
			// and not a verification (the scan keeps last_reconciled_at
			// honest; a stale snapshot must not clear a finding).
			d.Verified = false
		}
		rep.Counts[d.Verdict]++
		h.cfg.Metrics.verdict(d.Verdict, 1)
		results = append(results, Result{Row: r, Decision: d, External: obs.Status})
	}
	for _, id := range ids {
		if !known[id] {
			rep.Unknown++
			h.log.Warn("reconciler: heal: the provider has a payment we have no row for", "provider_payment_id", id)
		}
	}
	stats, err := h.cfg.Store.RecordFindings(ctx, SourceHeal, results)
	if err != nil {
		return fmt.Errorf("reconciler: heal: %w", err)
	}
	h.cfg.Metrics.recorded(stats)
	rep.RecordStats.add(stats)
	return nil
}

func (h *Healer) get(ctx context.Context, r Row, rep *HealReport) Observation {
	if err := h.wait(ctx); err != nil {
		return Observation{Outcome: Unavailable}
	}
	rep.Calls++
	e, err := h.cfg.Provider.Get(ctx, r.ProviderID)
	h.cfg.Metrics.call("get", outcomeOf(err))
	switch {
	case err == nil:
		return Observation{Outcome: Observed, Status: e.Status}
	case errors.Is(err, ErrProviderNotFound):
		return Observation{Outcome: NotFound}
	default:
		h.log.Warn("reconciler: heal: provider unavailable", "payment_id", r.PaymentID, "provider_payment_id", r.ProviderID, "err", err)
		return Observation{Outcome: Unavailable}
	}
}

func (h *Healer) wait(ctx context.Context) error {
	if h.cfg.Limiter == nil {
		return ctx.Err()
	}
	return h.cfg.Limiter.Wait(ctx)
}
