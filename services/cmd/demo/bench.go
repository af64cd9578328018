package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/services/internal/loadgen"
)

// warmUp places a few orders of each flow the run measures, one at a time,
// and waits until the saga is quiet. The measured orders then meet a
// running pipeline, not a fresh one: the first orders after a start wait
// for every consumer group to join and for the first fetch of each
// partition, about a second here, and at low rates that wait alone sets
// a run's p99. It prints how long the first warm-up order took (the cold
// start) and returns the database time from which orders are measured.
func warmUp(ctx context.Context, r *running, c config, step func(string, ...any)) (time.Time, error) {
	const perFlow = 4
	shares := []float64{0}
	switch {
	case c.orchestratedShare == 1:
		shares = []float64{1}
	case c.orchestratedShare > 0:
		shares = append(shares, 1)
	}
	var first time.Time
	if err := r.pools["order-svc"].QueryRow(ctx, `select clock_timestamp()`).Scan(&first); err != nil {
		return time.Time{}, err
	}
	for _, share := range shares {
		res, err := loadgen.Run(ctx, loadgen.Config{OrderURL: r.orderURL, APIKey: r.orderKey, Orders: perFlow, Concurrency: 1,
			SKUs: c.skus, OrchestratedShare: share, Seed: uint64(c.seed) + 1})
		if err != nil {
			return time.Time{}, fmt.Errorf("warm-up: %w", err)
		}
		if len(res.Created) != perFlow {
			return time.Time{}, fmt.Errorf("warm-up: %d of %d orders accepted", len(res.Created), perFlow)
		}
	}
	if err := waitQuiet(ctx, r, c.bound+30*time.Second); err != nil {
		return time.Time{}, fmt.Errorf("warm-up: %w", err)
	}
	var from time.Time
	var cold, slowest float64
	if err := r.pools["order-svc"].QueryRow(ctx, `select clock_timestamp(),
		coalesce((select extract(epoch from terminal_at - created_at) from orders where created_at >= $1 order by created_at limit 1), 0),
		coalesce((select max(extract(epoch from terminal_at - created_at)) from orders where created_at >= $1), 0)`, first).
		Scan(&from, &cold, &slowest); err != nil {
		return time.Time{}, err
	}
	step("warm-up: %d orders terminal; the first took %s (consumer groups joining, first fetches), the slowest %s; measuring from here",
		perFlow*len(shares), secs(cold), secs(slowest))
	return from, nil
}

func secs(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

// benchReport prints, per checkout flow placed in the run, throughput to a
// terminal state and the latency from order creation to its terminal
// state, as recorded by order-svc: both flows measured side by side at the
// same offered rate (--orchestrated-share splits it); then the legs of
// each flow's way; then where the CPU time went, per process,
// and each process's peak resident set. Only
// orders created at or after from are counted (the warm-up's are before).
func benchReport(ctx context.Context, r *running, res loadgen.Result, c config, usage []*measured, load *dbLoad, from time.Time) error {
	fmt.Printf("\nbench-saga: %d orders offered at %.0f/s (no faults), %.0f%% orchestrated; accepted %d\n",
		c.orders, c.rate, c.orchestratedShare*100, len(res.Created))
	terminal := 0
	for _, flow := range []string{"choreographed", "orchestrated"} {
		rows, err := r.pools["order-svc"].Query(ctx, `select extract(epoch from terminal_at - created_at) from orders
			where terminal_at is not null and flow = $1 and created_at >= $2`, flow, from)
		if err != nil {
			return err
		}
		secs, err := pgx.CollectRows(rows, pgx.RowTo[float64])
		if err != nil {
			return err
		}
		placed := count(ctx, r, "order-svc", `select count(*) from orders where flow = $1 and created_at >= $2`, flow, from)
		if placed == 0 {
			continue
		}
		lat := make([]time.Duration, len(secs))
		for i, s := range secs {
			lat[i] = time.Duration(s * float64(time.Second))
		}
		terminal += len(lat)
		var first, last *time.Time
		if err := r.pools["order-svc"].QueryRow(ctx, `select min(created_at), max(terminal_at) from orders where flow = $1 and created_at >= $2`, flow, from).
			Scan(&first, &last); err != nil {
			return err
		}
		var span time.Duration
		if first != nil && last != nil {
			span = last.Sub(*first)
		}
		confirmed := count(ctx, r, "order-svc", `select count(*) from orders where status = 'CONFIRMED' and flow = $1 and created_at >= $2`, flow, from)
		fmt.Printf("  %s: placed %d, terminal %d (confirmed %d), first created → last terminal %s\n",
			flow, placed, len(lat), confirmed, span.Round(time.Millisecond))
		if span > 0 {
			fmt.Printf("    throughput to terminal  %.0f orders/s\n", float64(len(lat))/span.Seconds())
		}
		fmt.Printf("    order → terminal        p50 %s  p99 %s  max %s\n", loadgen.Percentile(lat, 50).Round(time.Millisecond),
			loadgen.Percentile(lat, 99).Round(time.Millisecond), loadgen.Percentile(lat, 100).Round(time.Millisecond))
	}
	orch, err := orchestrated(ctx, r)
	if err != nil {
		return fmt.Errorf("the orchestrated saga's steps: %w", err)
	}
	for _, l := range []legs{choreographed, orch} {
		if err := printLegs(ctx, r, from, l); err != nil {
			return fmt.Errorf("where %s's time goes: %w", l.title, err)
		}
	}
	printUsage(usage, terminal)
	if load != nil {
		load.print(ctx, terminal)
	}
	if terminal != len(res.Created) {
		return fmt.Errorf("only %d of %d orders reached a terminal state", terminal, len(res.Created))
	}
	return nil
}
