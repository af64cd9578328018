package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/services/internal/loadgen"
)

// benchReport prints, per checkout flow placed in the run, throughput to a
// terminal state and the latency from order creation to its terminal
// state, as recorded by order-svc: both flows measured side by side at the
// same offered rate (--orchestrated-share splits it); then where the CPU
// time went, per process, and each process's peak resident set.
func benchReport(ctx context.Context, r *running, res loadgen.Result, c config, usage []*measured, load *dbLoad) error {
	fmt.Printf("\nbench-saga: %d orders offered at %.0f/s (no faults), %.0f%% orchestrated; accepted %d\n",
		c.orders, c.rate, c.orchestratedShare*100, len(res.Created))
	terminal := 0
	for _, flow := range []string{"choreographed", "orchestrated"} {
		rows, err := r.pools["order-svc"].Query(ctx, `select extract(epoch from terminal_at - created_at) from orders
			where terminal_at is not null and flow = $1`, flow)
		if err != nil {
			return err
		}
		secs, err := pgx.CollectRows(rows, pgx.RowTo[float64])
		if err != nil {
			return err
		}
		placed := count(ctx, r, "order-svc", `select count(*) from orders where flow = $1`, flow)
		if placed == 0 {
			continue
		}
		lat := make([]time.Duration, len(secs))
		for i, s := range secs {
			lat[i] = time.Duration(s * float64(time.Second))
		}
		terminal += len(lat)
		var first, last *time.Time
		if err := r.pools["order-svc"].QueryRow(ctx, `select min(created_at), max(terminal_at) from orders where flow = $1`, flow).
			Scan(&first, &last); err != nil {
			return err
		}
		var span time.Duration
		if first != nil && last != nil {
			span = last.Sub(*first)
		}
		confirmed := count(ctx, r, "order-svc", `select count(*) from orders where status = 'CONFIRMED' and flow = $1`, flow)
		fmt.Printf("  %s: placed %d, terminal %d (confirmed %d), first created → last terminal %s\n",
			flow, placed, len(lat), confirmed, span.Round(time.Millisecond))
		if span > 0 {
			fmt.Printf("    throughput to terminal  %.0f orders/s\n", float64(len(lat))/span.Seconds())
		}
		fmt.Printf("    order → terminal        p50 %s  p99 %s  max %s\n", loadgen.Percentile(lat, 50).Round(time.Millisecond),
			loadgen.Percentile(lat, 99).Round(time.Millisecond), loadgen.Percentile(lat, 100).Round(time.Millisecond))
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
