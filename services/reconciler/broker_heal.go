package reconciler

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/concordhq/concord/services/funding"
)

// BrokerHealReport says what a broker heal did.
type BrokerHealReport struct {
	Since, Until    time.Time
	Activities      int
	Journals        int
	Transfers       int
	WalletTransfers int
	Records         int // distinct broker records compared
	Unknown         int // of those, records the mirror has no row for
	Calls           int
	RateLimited     int // 429 answers met (and waited out)
	Counts          map[Verdict]int
	RecordStats
}

// Heal re-pulls the broker's records of [since, until) and feeds them
// through the same decide → finding → repair command path as the scan:
//
//  1. the activities stream, replayed for the window (a bounded replay the
//     broker ends at until): every journal and transfer an activity names,
//     and its account;
//  2. the journals created in the window, and any an activity named that
//     the list did not show (read by id);
//  3. the transfers and funding-wallet transfers of every account the mirror
//     or the window knows, kept when created in the window or named by one
//     of its activities.
//
// Every record is compared by broker id with the mirror's row; a record
// the mirror lacks is mirrored through the canonical writer. It keeps no
// state: findings are recorded once and commands only with a new finding,
// so re-running a window adds nothing.
func (b *BrokerReconciler) Heal(ctx context.Context, since, until time.Time) (rep BrokerHealReport, err error) {
	rep = BrokerHealReport{Since: since, Until: until, Counts: make(map[Verdict]int)}
	if !until.After(since) {
		return rep, fmt.Errorf("reconciler: heal window %s..%s is empty", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	calls, limited := b.cfg.Broker.Calls(), b.cfg.Broker.RateLimited()
	defer func() {
		rep.Calls, rep.RateLimited = b.cfg.Broker.Calls()-calls, b.cfg.Broker.RateLimited()-limited
	}()
	window := func(t time.Time) bool { return !t.Before(since) && t.Before(until) }

	named := map[BrokerRef]bool{}
	accounts := map[string]bool{}
	err = b.cfg.Broker.Activities(ctx, since, until, func(a Activity) {
		rep.Activities++
		if a.AccountID != "" {
			accounts[a.AccountID] = true
		}
		if a.JournalID != "" {
			named[BrokerRef{funding.Journal, a.JournalID}] = true
		}
		if a.TransferID != "" {
			named[BrokerRef{funding.Transfer, a.TransferID}] = true
		}
	})
	if err != nil {
		return rep, fmt.Errorf("reconciler: heal %s: activities: %w", span(since, until), err)
	}

	records := map[BrokerRef]BrokerRecord{}
	journals, err := b.cfg.Broker.Journals(ctx, since, until)
	if err != nil {
		return rep, fmt.Errorf("reconciler: heal %s: journals: %w", span(since, until), err)
	}
	for _, j := range journals {
		if window(j.CreatedAt) || named[BrokerRef{funding.Journal, j.BrokerID}] {
			records[BrokerRef{funding.Journal, j.BrokerID}] = j
		}
	}
	local, err := b.cfg.Store.Accounts(ctx)
	if err != nil {
		return rep, fmt.Errorf("reconciler: heal: %w", err)
	}
	for _, a := range local {
		accounts[a] = true
	}
	for _, r := range records {
		accounts[r.AccountID] = true
	}

	var mu sync.Mutex
	var errs []error
	keep := func(rs []BrokerRecord, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		for _, r := range rs {
			ref := BrokerRef{r.Domain, r.BrokerID}
			if window(r.CreatedAt) || named[ref] {
				records[ref] = r
			}
		}
	}
	var tasks []func()
	for ref := range named {
		if _, ok := records[ref]; ok || ref.Domain != funding.Journal {
			continue
		}
		tasks = append(tasks, func() {
			j, err := b.cfg.Broker.Journal(ctx, ref.BrokerID)
			keep([]BrokerRecord{j}, err)
		})
	}
	for a := range accounts {
		tasks = append(tasks,
			func() { keep(b.cfg.Broker.Transfers(ctx, a)) },
			func() { keep(b.cfg.Broker.WalletTransfers(ctx, a)) })
	}
	b.pool(ctx, tasks)
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if len(errs) > 0 {
		// A record not re-read could be one with drift: the heal is not
		// done, and says so rather than report a clean window.
		return rep, fmt.Errorf("reconciler: heal %s: %d broker reads failed, first: %w", span(since, until), len(errs), errs[0])
	}
	for ref := range records {
		switch ref.Domain {
		case funding.Journal:
			rep.Journals++
		case funding.Transfer:
			rep.Transfers++
		default:
			rep.WalletTransfers++
		}
	}
	rep.Records = len(records)
	refs := make([]BrokerRef, 0, len(records))
	for ref := range records {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].BrokerID < refs[j].BrokerID })
	for start := 0; start < len(refs); start += b.cfg.Batch {
		if err := b.healChunk(ctx, refs[start:min(start+b.cfg.Batch, len(refs))], records, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

func (b *BrokerReconciler) healChunk(ctx context.Context, refs []BrokerRef, records map[BrokerRef]BrokerRecord, rep *BrokerHealReport) error {
	rows, now, err := b.cfg.Store.MovementsByBrokerID(ctx, refs)
	if err != nil {
		return fmt.Errorf("reconciler: heal: %w", err)
	}
	known := make(map[BrokerRef]Movement, len(rows))
	for _, m := range rows {
		known[BrokerRef{m.Domain, m.BrokerID}] = m
	}
	results := make([]MovementResult, 0, len(refs))
	unknown := 0
	for _, ref := range refs {
		r := records[ref]
		res := MovementResult{Broker: r}
		if m, ok := known[ref]; ok {
			res.Movement, res.Known = m, true
			res.Decision = DecideMovement(m, Observation{Outcome: Observed, Status: r.Status}, now, b.cfg.Grace)
		} else {
			unknown++
			res.Decision = DecideUnknown(r, now, b.cfg.Grace)
		}
		b.note(ref.Domain, ref.BrokerID, r.Status, res.Decision)
		rep.Counts[res.Decision.Verdict]++
		b.cfg.Metrics.verdict(res.Decision.Verdict, 1)
		results = append(results, res)
	}
	stats, err := b.cfg.Store.RecordMovementFindings(ctx, SourceHeal, results)
	if err != nil {
		return fmt.Errorf("reconciler: heal: %w", err)
	}
	b.cfg.Metrics.recorded(stats)
	b.cfg.Metrics.unknownRecord(unknown)
	rep.Unknown += unknown
	rep.RecordStats.add(stats)
	return nil
}

func span(since, until time.Time) string {
	return since.UTC().Format(time.RFC3339) + ".." + until.UTC().Format(time.RFC3339)
}
