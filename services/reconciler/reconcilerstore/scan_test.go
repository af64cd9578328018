package reconcilerstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/services/providersim"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

// scanBroken is the seed's anti-pattern, kept here only to show what it
// does: every run looks at the 200 most recently updated rows.
func scanBroken(t *testing.T, pool *pgxpool.Pool, p reconciler.Provider) {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `select id, provider_payment_id from payments order by updated_at desc limit 200`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id  int64
		ref string
	}
	var todo []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.ref); err != nil {
			t.Fatal(err)
		}
		todo = append(todo, r)
	}
	rows.Close()
	for _, r := range todo {
		if _, err := p.Get(ctx, r.ref); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `update payments set last_reconciled_at = now() where id = $1`, r.id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCursorScanChecksEveryRowWhereLatestByUpdatedAtStarvesOldRows is the
// seed's starvation test: "latest 200 by updated_at" leaves 300 of 500 rows
// never checked after 10 runs; the keyset cursor checks all 500 within 3.
func TestCursorScanChecksEveryRowWhereLatestByUpdatedAtStarvesOldRows(t *testing.T) {
	ctx := context.Background()
	fake := newFake()
	for i := 1; i <= 500; i++ {
		fake.status[fmt.Sprintf("pi_%d", i)] = reconciler.ExtSucceeded
	}
	broken, cursor := newDB(t), newDB(t)
	seed(t, broken, 500, reconciler.LocalPaid, func(i int) string { return fmt.Sprintf("pi_%d", i) })
	seed(t, cursor, 500, reconciler.LocalPaid, func(i int) string { return fmt.Sprintf("pi_%d", i) })

	for range 10 {
		scanBroken(t, broken, fake)
	}
	if never := count(t, broken, `select count(*) from payments where last_reconciled_at is null`); never != 300 {
		t.Fatalf("broken scan: %d rows never checked after 10 runs, the seed says 300", never)
	}

	s := newScanner(t, cursor, fake, nil)
	for run := 1; run <= 3; run++ {
		rep, err := s.RunBatch(ctx)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if rep.Counts[reconciler.InSync] != rep.Scanned {
			t.Fatalf("run %d: verdicts %v", run, rep.Counts)
		}
	}
	if never := count(t, cursor, `select count(*) from payments where last_reconciled_at is null`); never != 0 {
		t.Fatalf("cursor scan: %d rows never checked after 3 runs, want 0", never)
	}
	// The next run finds the end and starts a new cycle.
	rep, err := s.RunBatch(ctx)
	if err != nil || !rep.Wrapped {
		t.Fatalf("fourth run: wrapped=%v err=%v, want the cycle completed", rep.Wrapped, err)
	}
	st, err := reconcilerstore.New(cursor).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Cursors) != 1 || st.Cursors[0].CyclesCompleted != 1 || st.Cursors[0].LastID != 0 {
		t.Fatalf("cursor after wrap: %+v", st.Cursors)
	}
}

// TestTwoReconcilersAtOnceRecordEachDriftOnce runs two scanners on the same
// job and page at the same time: exactly one records it, the other reports
// ErrConcurrentRun, and there is one finding and one command per drift.
func TestTwoReconcilersAtOnceRecordEachDriftOnce(t *testing.T) {
	ctx := context.Background()
	pool := newDB(t)
	fake := newFake()
	seed(t, pool, 10, reconciler.LocalPending, func(i int) string {
		ref := fmt.Sprintf("pi_%d", i)
		fake.status[ref] = reconciler.ExtSucceeded
		return ref
	})
	// Both scanners must have read the page before either asks the
	// provider, so they work on the same page for sure.
	var arrived sync.WaitGroup
	arrived.Add(2)
	gate := func() reconciler.Provider {
		var once sync.Once
		return providerFunc(func(ctx context.Context, id string) (reconciler.External, error) {
			once.Do(func() { arrived.Done(); arrived.Wait() })
			return fake.Get(ctx, id)
		})
	}
	a := newScanner(t, pool, gate(), nil)
	b := newScanner(t, pool, gate(), nil)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, s := range []*reconciler.Scanner{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.RunBatch(ctx)
		}()
	}
	wg.Wait()
	if isConcurrent(errs[0]) == isConcurrent(errs[1]) {
		t.Fatalf("errors %v and %v: want exactly one ErrConcurrentRun", errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil && !isConcurrent(err) {
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if n := count(t, pool, `select count(*) from reconciliation_findings`); n != 10 {
		t.Fatalf("%d findings, want 10 (one per payment)", n)
	}
	if n := count(t, pool, `select count(*) from outbox where event_type = 'payment.apply_succeeded'`); n != 10 {
		t.Fatalf("%d repair commands, want 10", n)
	}
}

type providerFunc func(ctx context.Context, id string) (reconciler.External, error)

func (f providerFunc) Get(ctx context.Context, id string) (reconciler.External, error) {
	return f(ctx, id)
}

// TestProviderOutageLeavesRowsUnverifiableAndLagGrows: with the provider
// answering 5xx to everything, no row is called in sync, none has
// last_reconciled_at advanced, the cursor stays, the lag keeps growing, and
// the scanner stops asking after a few failures instead of burning its rate.
func TestProviderOutageLeavesRowsUnverifiableAndLagGrows(t *testing.T) {
	ctx := context.Background()
	pool := newDB(t)
	ps := newSim(t, providersim.Config{})
	refs := make([]string, 50)
	for i := range refs {
		refs[i] = ps.charge(t, fmt.Sprintf("outage-%d", i), providersim.PaymentMethodVisa).ProviderID
	}
	seed(t, pool, 50, reconciler.LocalPaid, func(i int) string { return refs[i-1] })
	store := reconcilerstore.New(pool)
	before, err := store.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}

	f := ps.srv.Faults()
	f.ServerErrorRate = 1
	if err := ps.srv.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	s := newScanner(t, pool, ps.p, func(c *reconciler.ScannerConfig) { c.Concurrency = 1 })
	rep, err := s.RunBatch(ctx)
	if !errors.Is(err, reconciler.ErrProviderUnavailable) {
		t.Fatalf("batch during outage: err %v, want ErrProviderUnavailable", err)
	}
	if rep.Counts[reconciler.InSync] != 0 || rep.Counts[reconciler.Unverifiable] != 50 {
		t.Fatalf("verdicts during outage %v, want all 50 unverifiable", rep.Counts)
	}
	if rep.Calls != reconciler.DefaultOutageThreshold {
		t.Fatalf("%d calls during outage, want the scanner to stop after %d", rep.Calls, reconciler.DefaultOutageThreshold)
	}
	if n := count(t, pool, `select count(*) from payments where last_reconciled_at is not null or observed_external_status is not null`); n != 0 {
		t.Fatalf("%d rows marked verified during an outage", n)
	}
	if n := count(t, pool, `select count(*) from reconciliation_findings`); n != 0 {
		t.Fatalf("%d findings during an outage", n)
	}
	during, err := store.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if during.Lag <= before.Lag || during.Cursors[0].LastID != 0 {
		t.Fatalf("lag %v → %v, cursor %d: want the lag to grow and the cursor to stay", before.Lag, during.Lag, during.Cursors[0].LastID)
	}

	// The provider comes back: the same page is verified.
	f.ServerErrorRate = 0
	if err := ps.srv.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	rep, err = s.RunBatch(ctx)
	if err != nil || rep.Counts[reconciler.InSync] != 50 {
		t.Fatalf("after the outage: %v, verdicts %v", err, rep.Counts)
	}
	after, err := store.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Lag >= during.Lag {
		t.Fatalf("lag after recovery %v, want below %v", after.Lag, during.Lag)
	}
}

// TestPaidLocallyButNotAtProviderIsOneReviewFindingAndNoChange: the
// provider canceled a payment we recorded as paid. The reconciler records a
// single NEEDS_REVIEW finding however often it scans, emits no command and
// leaves the payment alone.
func TestPaidLocallyButNotAtProviderIsOneReviewFindingAndNoChange(t *testing.T) {
	ctx := context.Background()
	pool := newDB(t)
	ps := newSim(t, providersim.Config{})
	p := ps.charge(t, "paid-not-external", providersim.PaymentMethodVisa)
	if err := ps.srv.ForceStatus(p.ProviderID, providersim.StatusCanceled, false); err != nil {
		t.Fatal(err)
	}
	ids := seed(t, pool, 1, reconciler.LocalPaid, func(int) string { return p.ProviderID })
	s := newScanner(t, pool, ps.p, nil)
	for cycle := 1; cycle <= 3; cycle++ {
		if _, err := s.RunCycle(ctx); err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
	}
	fs, err := reconcilerstore.New(pool).Findings(ctx, reconcilerstore.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 1 || fs[0].Kind != reconciler.KindPaidLocallyNotExternally || fs[0].Verdict != reconciler.NeedsReview ||
		fs[0].ExternalStatus != reconciler.ExtCanceled || fs[0].PaymentID != ids[0] {
		t.Fatalf("findings %+v, want one paid_locally_not_externally review", fs)
	}
	if n := count(t, pool, `select count(*) from outbox`); n != 0 {
		t.Fatalf("%d outbox rows, want no command for a review finding", n)
	}
	if n := count(t, pool, `select count(*) from payments where status = 'paid' and version = 0`); n != 1 {
		t.Fatal("the payment changed; a review finding must not touch it")
	}
	// The metrics read the finding as one open review among one payment.
	st, err := reconcilerstore.New(pool).Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Payments != 1 || st.OpenByVerdict[reconciler.NeedsReview] != 1 || st.OpenByVerdict[reconciler.Repairable] != 0 {
		t.Fatalf("status: %d payments, open by verdict %v; want 1 payment and one needs_review finding", st.Payments, st.OpenByVerdict)
	}
}

// TestRescanningUnchangedDriftAddsNoFindingOrCommand: a lost success webhook
// (pending here, succeeded there) found on three cycles is one finding and
// one command.
func TestRescanningUnchangedDriftAddsNoFindingOrCommand(t *testing.T) {
	ctx := context.Background()
	pool := newDB(t)
	fake := newFake()
	fake.status["pi_lost"] = reconciler.ExtSucceeded
	seed(t, pool, 1, reconciler.LocalPending, func(int) string { return "pi_lost" })
	s := newScanner(t, pool, fake, nil)
	var opened, commands int
	for cycle := 1; cycle <= 3; cycle++ {
		rep, err := s.RunCycle(ctx)
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		opened += rep.FindingsOpened
		commands += rep.CommandsEmitted
	}
	if opened != 1 || commands != 1 {
		t.Fatalf("over 3 cycles: %d findings opened, %d commands; want 1 and 1", opened, commands)
	}
	if n := count(t, pool, `select count(*) from reconciliation_findings`); n != 1 {
		t.Fatalf("%d findings stored, want 1", n)
	}
	if n := count(t, pool, `select count(*) from outbox where event_type = 'payment.apply_succeeded'`); n != 1 {
		t.Fatalf("%d commands stored, want 1", n)
	}
}

// TestRowsInGraceAreNotAskedAndUnknownStatusesAreReviewed: a row changed a
// moment ago is in flight and costs no call; a status the reconciler does
// not know is recorded for review instead of crashing the scan; a payment
// the provider does not know is missing_externally.
func TestRowsInGraceAreNotAskedAndUnknownStatusesAreReviewed(t *testing.T) {
	ctx := context.Background()
	pool := newDB(t)
	fake := newFake()
	fake.status["pi_weird"] = "requires_reauthorization"
	seed(t, pool, 2, reconciler.LocalPaid, func(i int) string { return []string{"pi_weird", "pi_gone"}[i-1] })
	if _, err := pool.Exec(ctx, `insert into payments (order_id, idempotency_key, provider_payment_id, amount, currency, status)
		values ('fresh', 'fresh', 'pi_fresh', 1, 'EUR', 'pending')`); err != nil {
		t.Fatal(err)
	}
	s := newScanner(t, pool, fake, nil)
	rep, err := s.RunBatch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts[reconciler.InFlight] != 1 || rep.Counts[reconciler.NeedsReview] != 2 || fake.Calls() != 2 {
		t.Fatalf("verdicts %v after %d calls; want 1 in flight (not asked) and 2 reviews after 2 calls", rep.Counts, fake.Calls())
	}
	kinds := map[reconciler.Kind]int{}
	fs, err := reconcilerstore.New(pool).Findings(ctx, reconcilerstore.FindingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		kinds[f.Kind]++
	}
	if kinds[reconciler.KindUnknownExternalStatus] != 1 || kinds[reconciler.KindMissingExternally] != 1 {
		t.Fatalf("finding kinds %v", kinds)
	}
	if n := count(t, pool, `select count(*) from payments where provider_payment_id = 'pi_fresh' and last_reconciled_at is null`); n != 1 {
		t.Fatal("a row in the grace window was marked verified")
	}
}

// TestListVerificationNeedsFarFewerCallsPerRow verifies 250 payments by
// creation window (100 per call) and reaches the same verdicts as asking
// row by row.
func TestListVerificationNeedsFarFewerCallsPerRow(t *testing.T) {
	ctx := context.Background()
	ps := newSim(t, providersim.Config{})
	refs := make([]string, 250)
	for i := range refs {
		refs[i] = ps.charge(t, fmt.Sprintf("list-%d", i), providersim.PaymentMethodVisa).ProviderID
	}
	if err := ps.srv.ForceStatus(refs[7], providersim.StatusCanceled, false); err != nil {
		t.Fatal(err)
	}
	run := func(list bool) reconciler.CycleReport {
		pool := newDB(t)
		seed(t, pool, 250, reconciler.LocalPaid, func(i int) string { return refs[i-1] })
		s := newScanner(t, pool, ps.p, func(c *reconciler.ScannerConfig) {
			c.Batch = 250
			c.ListSkew = 2 * time.Hour // rows are seeded an hour before the provider saw them
			if list {
				c.Lister = ps.p
			}
		})
		rep, err := s.RunCycle(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	perRow, listed := run(false), run(true)
	for _, rep := range []reconciler.CycleReport{perRow, listed} {
		if rep.Counts[reconciler.InSync] != 249 || rep.Counts[reconciler.NeedsReview] != 1 || rep.Observed != 250 {
			t.Fatalf("verdicts %v, observed %d", rep.Counts, rep.Observed)
		}
	}
	if perRow.Calls != 250 || listed.Calls != 3 {
		t.Fatalf("calls: per-row %d (want 250), list %d (want 3)", perRow.Calls, listed.Calls)
	}
}
