package reconciler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/concordhq/concord/services/funding"
)

// BrokerStore is the reconciler's record in the funding database: the
// same cursor compare-and-set and findings as Store, over movements.
type BrokerStore interface {
	// ReadMovements reads up to limit movements after the job's cursor (see
	// Store.ReadPage).
	ReadMovements(ctx context.Context, job string, limit int) (MovementPage, error)
	// RecordMovements records a page's results and advances the cursor by
	// compare-and-set (ErrConcurrentRun), as Store.Record.
	RecordMovements(ctx context.Context, page MovementPage, results []MovementResult) (RecordStats, error)
	// CompleteCycle is Store.CompleteCycle.
	CompleteCycle(ctx context.Context, job string, cursorID int64) error
	// MovementsByBrokerID reads the movements the broker knows by refs,
	// and the database's clock.
	MovementsByBrokerID(ctx context.Context, refs []BrokerRef) ([]Movement, time.Time, error)
	// Accounts lists the accounts the mirror holds movements of.
	Accounts(ctx context.Context) ([]string, error)
	// RecordMovementFindings records results without a cursor (heal).
	RecordMovementFindings(ctx context.Context, source Source, results []MovementResult) (RecordStats, error)
}

// Activity is one message of the broker's activities stream, reduced to
// the records it names.
type Activity struct {
	AccountID  string
	Type       string // JNLC, CSD, CSW, …
	JournalID  string
	TransferID string
}

// BrokerReader reads the broker's records. Errors wrap
// ErrProviderUnavailable or ErrProviderNotFound as for Provider; the
// reader paces its calls and waits out the broker's rate limit itself.
type BrokerReader interface {
	Journal(ctx context.Context, id string) (BrokerRecord, error)
	// Journals lists the journals created in [since, until).
	Journals(ctx context.Context, since, until time.Time) ([]BrokerRecord, error)
	// Transfers lists every ACH/wire transfer of the account (there is no
	// GET by id).
	Transfers(ctx context.Context, account string) ([]BrokerRecord, error)
	WalletTransfer(ctx context.Context, account, id string) (BrokerRecord, error)
	// WalletTransfers lists the account's funding-wallet transfers.
	WalletTransfers(ctx context.Context, account string) ([]BrokerRecord, error)
	// Activities replays the activities stream for [since, until) (a
	// bounded replay, which the broker ends at until).
	Activities(ctx context.Context, since, until time.Time, each func(Activity)) error
	// Calls and RateLimited count the calls made and the 429s met.
	Calls() int
	RateLimited() int
}

// BrokerConfig configures a BrokerReconciler. Zero values take defaults.
type BrokerConfig struct {
	Job    string
	Store  BrokerStore
	Broker BrokerReader
	Batch  int
	Grace  time.Duration
	// ExecutedWindow: how long a movement that looks final is still
	// compared with the broker (DefaultExecutedWindow).
	ExecutedWindow time.Duration
	// Workers bounds the broker calls in flight.
	Workers int
	// ListSkew widens the creation window a page's journals are listed by
	// (DefaultListSkew).
	ListSkew time.Duration
	Metrics  *Metrics
	Logger   *slog.Logger
}

// BrokerReconciler reconciles funding-svc's mirror with the broker: a
// cursor scan of the local movements (RunBatch, RunCycle, Run) and the
// windowed re-pull (Heal). Both feed DecideMovement's decisions to the
// store, which records findings once and appends repair commands for
// funding-svc's canonical writer.
type BrokerReconciler struct {
	cfg BrokerConfig
	log *slog.Logger
}

// NewBrokerReconciler checks cfg and fills in defaults.
func NewBrokerReconciler(cfg BrokerConfig) (*BrokerReconciler, error) {
	if cfg.Store == nil || cfg.Broker == nil {
		return nil, errors.New("reconciler: the broker reconciler needs a store and a broker")
	}
	if cfg.Grace < 0 || cfg.ExecutedWindow < 0 {
		return nil, fmt.Errorf("reconciler: grace %v and executed window %v must not be negative", cfg.Grace, cfg.ExecutedWindow)
	}
	if cfg.Job == "" {
		cfg.Job = DefaultBrokerJob
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.ExecutedWindow == 0 {
		cfg.ExecutedWindow = DefaultExecutedWindow
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultConcurrency
	}
	if cfg.ListSkew <= 0 {
		cfg.ListSkew = DefaultListSkew
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &BrokerReconciler{cfg: cfg, log: cfg.Logger.With("job", cfg.Job)}, nil
}

// Job is the cursor the scan advances.
func (b *BrokerReconciler) Job() string { return b.cfg.Job }

// BrokerBatchReport says what one scan batch did.
type BrokerBatchReport struct {
	BatchReport
	// Settled movements looked final for longer than the executed window
	// and were not asked about.
	Settled int
}

// RunBatch reads one page of movements, asks the broker about those under
// reconciliation outside any transaction, and records the results while
// advancing the cursor (see Scanner.RunBatch for the errors).
func (b *BrokerReconciler) RunBatch(ctx context.Context) (BrokerBatchReport, error) {
	page, err := b.cfg.Store.ReadMovements(ctx, b.cfg.Job, b.cfg.Batch)
	if err != nil {
		return BrokerBatchReport{}, fmt.Errorf("reconciler: job %s: read page: %w", b.cfg.Job, err)
	}
	rep := BrokerBatchReport{BatchReport: BatchReport{CursorFrom: page.CursorID, CursorTo: page.CursorID, Counts: make(map[Verdict]int)}}
	if len(page.Rows) == 0 {
		if err := b.cfg.Store.CompleteCycle(ctx, b.cfg.Job, page.CursorID); err != nil {
			if errors.Is(err, ErrConcurrentRun) {
				b.cfg.Metrics.concurrent()
			}
			return rep, fmt.Errorf("reconciler: job %s: complete cycle at id %d: %w", b.cfg.Job, page.CursorID, err)
		}
		rep.Wrapped, rep.CursorTo = true, 0
		return rep, nil
	}
	calls := b.cfg.Broker.Calls()
	var ask []Movement
	for _, m := range page.Rows {
		switch {
		case Settled(m.Status, m.UpdatedAt, page.Now, b.cfg.ExecutedWindow):
			rep.Settled++
		case m.BrokerID != "" && page.Now.Sub(m.UpdatedAt) >= b.cfg.Grace:
			ask = append(ask, m)
		}
	}
	seen := b.observe(ctx, ask)
	var results []MovementResult
	answered := 0
	for _, m := range page.Rows {
		if Settled(m.Status, m.UpdatedAt, page.Now, b.cfg.ExecutedWindow) {
			continue
		}
		o := seen[BrokerRef{m.Domain, m.BrokerID}]
		if o.Outcome == Observed || o.Outcome == NotFound {
			answered++
		}
		d := DecideMovement(m, Observation{Outcome: o.Outcome, Status: o.Record.Status}, page.Now, b.cfg.Grace)
		b.note(m.Domain, m.BrokerID, o.Record.Status, d)
		rep.Counts[d.Verdict]++
		results = append(results, MovementResult{Movement: m, Known: true, Broker: o.Record, Decision: d})
	}
	rep.Scanned, rep.Observed, rep.Calls = len(page.Rows), answered, b.cfg.Broker.Calls()-calls
	err = finishBatch(ctx, b.cfg.Metrics, b.cfg.Job, &rep.BatchReport, len(ask), page.Rows[len(page.Rows)-1].ID,
		func() (RecordStats, error) { return b.cfg.Store.RecordMovements(ctx, page, results) })
	return rep, err
}

// note logs a status no map knows: it is recorded for review, never a crash.
func (b *BrokerReconciler) note(d funding.Domain, id, status string, dec Decision) {
	if dec.Kind == KindUnknownExternalStatus {
		b.log.Warn("reconciler: the broker reported a status this version does not know; recording it for review",
			"domain", d, "broker_id", id, "status", status)
	}
}

// observation is what the broker said about one record.
type observation struct {
	Outcome Outcome
	Record  BrokerRecord
}

// observe asks the broker about each movement: journals by one list of
// their creation window, then by id for any the list did not show; wallet
// transfers by id; transfers by their account's list (one call per
// account, there being no GET by id); Workers at a time.
func (b *BrokerReconciler) observe(ctx context.Context, ms []Movement) map[BrokerRef]observation {
	out := b.listJournals(ctx, ms)
	var mu sync.Mutex
	put := func(ref BrokerRef, o observation) {
		mu.Lock()
		out[ref] = o
		mu.Unlock()
	}
	var tasks []func()
	byAccount := map[string][]Movement{}
	for _, m := range ms {
		ref := BrokerRef{m.Domain, m.BrokerID}
		if _, listed := out[ref]; listed {
			continue
		}
		switch m.Domain {
		case funding.Transfer:
			byAccount[m.AccountID] = append(byAccount[m.AccountID], m)
		case funding.Journal:
			tasks = append(tasks, func() { put(ref, outcome(b.cfg.Broker.Journal(ctx, m.BrokerID))) })
		default:
			tasks = append(tasks, func() { put(ref, outcome(b.cfg.Broker.WalletTransfer(ctx, m.AccountID, m.BrokerID))) })
		}
	}
	for account, want := range byAccount {
		tasks = append(tasks, func() {
			list, err := b.cfg.Broker.Transfers(ctx, account)
			found := make(map[string]BrokerRecord, len(list))
			for _, r := range list {
				found[r.BrokerID] = r
			}
			for _, m := range want {
				o := observation{Outcome: Unavailable}
				if err == nil {
					o = observation{Outcome: NotFound}
					if r, ok := found[m.BrokerID]; ok {
						o = observation{Outcome: Observed, Record: r}
					}
				}
				put(BrokerRef{m.Domain, m.BrokerID}, o)
			}
		})
	}
	b.pool(ctx, tasks)
	return out
}

// listJournals lists the journals created in the window of ms's journals,
// widened by ListSkew on both sides (the broker stamps a journal after the
// intent row is written, the stream's mirror after the broker), and
// returns those it found. One call instead of one per journal; a journal
// the list does not show is left to be read by id, as are all of them when
// the list fails. With fewer than two journals a list saves nothing.
func (b *BrokerReconciler) listJournals(ctx context.Context, ms []Movement) map[BrokerRef]observation {
	out := make(map[BrokerRef]observation, len(ms))
	want := map[string]bool{}
	var lo, hi time.Time
	for _, m := range ms {
		if m.Domain != funding.Journal {
			continue
		}
		if len(want) == 0 || m.CreatedAt.Before(lo) {
			lo = m.CreatedAt
		}
		if len(want) == 0 || m.CreatedAt.After(hi) {
			hi = m.CreatedAt
		}
		want[m.BrokerID] = true
	}
	if len(want) < 2 {
		return out
	}
	since, until := lo.Add(-b.cfg.ListSkew), hi.Add(b.cfg.ListSkew)
	list, err := b.cfg.Broker.Journals(ctx, since, until)
	if err != nil {
		b.log.Warn("reconciler: list of journals by creation window failed; reading them by id",
			"since", since, "until", until, "err", err)
		return out
	}
	for _, r := range list {
		if want[r.BrokerID] {
			out[BrokerRef{funding.Journal, r.BrokerID}] = observation{Outcome: Observed, Record: r}
		}
	}
	return out
}

func outcome(r BrokerRecord, err error) observation {
	switch {
	case err == nil:
		return observation{Outcome: Observed, Record: r}
	case errors.Is(err, ErrProviderNotFound):
		return observation{Outcome: NotFound}
	default:
		return observation{Outcome: Unavailable}
	}
}

// pool runs tasks on Workers goroutines; a task cut short by ctx leaves
// its records unverified.
func (b *BrokerReconciler) pool(ctx context.Context, tasks []func()) {
	ch := make(chan func())
	var wg sync.WaitGroup
	for range min(b.cfg.Workers, len(tasks)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range ch {
				f()
			}
		}()
	}
	for _, f := range tasks {
		if ctx.Err() != nil {
			break
		}
		ch <- f
	}
	close(ch)
	wg.Wait()
}

// BrokerCycleReport sums the batches of one full cycle.
type BrokerCycleReport struct {
	CycleReport
	Settled int
}

// RunCycle runs batches until the cursor wraps (see Scanner.RunCycle).
func (b *BrokerReconciler) RunCycle(ctx context.Context) (BrokerCycleReport, error) {
	settled := 0
	rep, err := runCycle(ctx, b.cfg.Metrics, func(ctx context.Context) (BatchReport, error) {
		bt, err := b.RunBatch(ctx)
		settled += bt.Settled
		return bt.BatchReport, err
	})
	return BrokerCycleReport{CycleReport: rep, Settled: settled}, err
}

// Run scans until ctx ends, as Scanner.Run.
func (b *BrokerReconciler) Run(ctx context.Context, idle, backoff time.Duration) error {
	return runLoop(ctx, idle, backoff, b.log, func(ctx context.Context) (CycleReport, []any, error) {
		rep, err := b.RunCycle(ctx)
		return rep.CycleReport, []any{"settled", rep.Settled}, err
	})
}
