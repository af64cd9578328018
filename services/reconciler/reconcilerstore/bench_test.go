package reconcilerstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/providersim"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerprovider"
)

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// BenchmarkReconcilerCycle measures a full reconciliation cycle over
// RECONCILER_BENCH_ROWS payments (default 100,000) against provider-sim
// enforcing Stripe's test-mode limit of 25 requests/s, with the reconciler
// paced at RECONCILER_BENCH_SHARE percent of it (default 80). List-based
// verification runs the whole table; per-row verification, which needs one
// call per row, runs on the first RECONCILER_BENCH_SAMPLE rows (default
// 1,000) and its full-cycle time is extrapolated from that sample, since at
// one call per row 100,000 rows take over an hour by construction.
//
//	make bench-reconciler
func BenchmarkReconcilerCycle(b *testing.B) {
	ctx := context.Background()
	rows := envInt("RECONCILER_BENCH_ROWS", 100_000)
	sample := min(envInt("RECONCILER_BENCH_SAMPLE", 1_000), rows)
	share := float64(envInt("RECONCILER_BENCH_SHARE", 80)) / 100
	const providerLimit = 25.0

	// Build the provider's state fast (no limit, a manual clock one second
	// per payment, so creation times spread over rows seconds ending just before the grace window),
	// snapshot it, and serve it again with the limit on the real clock.
	dir := b.TempDir()
	start := time.Now().Add(-time.Duration(rows)*time.Second - reconciler.DefaultGrace - time.Minute).Truncate(time.Second)
	clock := providersim.NewManualClock(start)
	// The simulator's housekeeping (expiring idempotency keys, due jobs)
	// scans its whole state every tick; with 100k payments that would
	// measure the simulator, not the reconciler, so it ticks rarely here.
	build, err := providersim.New(providersim.Config{DataDir: dir, Clock: clock, Faults: providersim.DefaultFaults(),
		SnapshotInterval: time.Hour, TickInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	bts := httptest.NewServer(build)
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_bench", BaseURL: bts.URL, HTTPClient: &http.Client{Timeout: 10 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	refs := make([]string, rows)
	created := make([]time.Time, rows)
	t0 := time.Now()
	for i := range rows {
		created[i] = clock.Advance(time.Second)
		p, err := gw.CreateAndConfirm(ctx, paymentprovider.Intent{IdempotencyKey: "bench-" + strconv.Itoa(i), Amount: 2500,
			Currency: "eur", PaymentMethod: providersim.PaymentMethodVisa})
		if err != nil {
			b.Fatalf("create payment %d: %v", i, err)
		}
		refs[i] = p.ProviderID
	}
	bts.Close()
	if err := build.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("provider state: %d payments built in %s", rows, time.Since(t0).Round(time.Millisecond))

	// Served again on the real clock with Stripe's limit. The build's
	// idempotency keys are of no use to the reconciler (it only reads), so
	// they expire on the first tick instead of being rescanned all run.
	srv, err := providersim.New(providersim.Config{DataDir: dir, RateLimit: providerLimit, Faults: providersim.DefaultFaults(),
		IdempotencyTTL: time.Nanosecond, TickInterval: time.Second, SnapshotInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	gw, err = paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_bench", BaseURL: ts.URL, HTTPClient: &http.Client{Timeout: 10 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	prov := reconcilerprovider.New(gw)

	run := func(name string, n int, list bool) reconciler.CycleReport {
		pool := newDB(b)
		for lo := 0; lo < n; lo += 10_000 {
			hi := min(lo+10_000, n)
			if _, err := pool.Exec(ctx, `insert into payments (order_id, idempotency_key, provider_payment_id, amount,
					currency, status, created_at, updated_at)
				select gen_random_uuid()::text, 'bench-' || r, r, 2500, 'EUR', 'paid', c, c
				from unnest($1::text[], $2::timestamptz[]) as t(r, c)`, refs[lo:hi], created[lo:hi]); err != nil {
				b.Fatal(err)
			}
		}
		cfg := func(c *reconciler.ScannerConfig) {
			c.Batch = 1000
			c.Limiter = rate.NewLimiter(rate.Limit(providerLimit*share), 1)
			if list {
				c.Lister = prov
			}
		}
		s := newScanner(b, pool, prov, func(c *reconciler.ScannerConfig) {
			cfg(c)
			c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
		rep, err := s.RunCycle(ctx)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		b.Logf("%s: %d rows in %s, %d calls, verdicts %v", name, n, rep.Duration.Round(time.Millisecond), rep.Calls, rep.Counts)
		if rep.Counts[reconciler.InSync] != n || rep.Observed != n {
			b.Fatalf("%s: verdicts %v, observed %d of %d (provider stats %+v)", name, rep.Counts, rep.Observed, n, srv.Stats())
		}
		return rep
	}

	b.ResetTimer()
	listed := run("list-based", rows, true)
	perRow := run("per-row", sample, false)
	b.StopTimer()
	st := srv.Stats()
	b.Logf("provider: %d requests, %d refused with 429", st.Requests, st.RateLimited)
	if st.RateLimited > 0 {
		b.Errorf("the provider refused %d requests with 429: the limiter let the reconciler exceed its share", st.RateLimited)
	}

	perRowFull := time.Duration(float64(perRow.Duration) * float64(rows) / float64(sample))
	fmt.Printf("\nreconciler cycle: %d payments, provider limit %.0f req/s, reconciler paced at %.0f%% (%.1f req/s)\n",
		rows, providerLimit, share*100, providerLimit*share)
	fmt.Printf("%-12s %10s %10s %14s %16s %18s\n", "mode", "rows", "calls", "calls/row", "rows verified/s", "full-cycle time")
	fmt.Printf("%-12s %10d %10d %14.4f %16.1f %18s\n", "list-based", rows, listed.Calls, listed.CallsPerVerifiedRow(),
		float64(listed.Observed)/listed.Duration.Seconds(), listed.Duration.Round(time.Millisecond))
	fmt.Printf("%-12s %10d %10d %14.4f %16.1f %18s  (measured on %d rows, extrapolated to %d)\n", "per-row", sample, perRow.Calls,
		perRow.CallsPerVerifiedRow(), float64(perRow.Observed)/perRow.Duration.Seconds(), perRowFull.Round(time.Second), sample, rows)
	ratio := perRow.CallsPerVerifiedRow() / listed.CallsPerVerifiedRow()
	fmt.Printf("list-based uses %.1fx fewer calls per verified row (target >= 20x); full cycle %s (target < 5m)\n\n",
		ratio, listed.Duration.Round(time.Second))
	b.ReportMetric(listed.CallsPerVerifiedRow(), "list-calls/row")
	b.ReportMetric(perRow.CallsPerVerifiedRow(), "perrow-calls/row")
	b.ReportMetric(listed.Duration.Seconds(), "list-cycle-s")
	b.ReportMetric(perRowFull.Seconds(), "perrow-cycle-s(extrap)")
}
