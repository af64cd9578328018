package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/services/internal/loadgen"
)

// benchReport prints throughput to a terminal state and the latency from
// order creation to its terminal state, as recorded by order-svc.
func benchReport(ctx context.Context, r *running, res loadgen.Result, c config) error {
	rows, err := r.pools["order-svc"].Query(ctx, `select extract(epoch from terminal_at - created_at) from orders where terminal_at is not null`)
	if err != nil {
		return err
	}
	secs, err := pgx.CollectRows(rows, pgx.RowTo[float64])
	if err != nil {
		return err
	}
	lat := make([]time.Duration, len(secs))
	for i, s := range secs {
		lat[i] = time.Duration(s * float64(time.Second))
	}
	var first, last time.Time
	if err := r.pools["order-svc"].QueryRow(ctx, `select min(created_at), max(terminal_at) from orders`).Scan(&first, &last); err != nil {
		return err
	}
	span := last.Sub(first)
	confirmed := count(ctx, r, "order-svc", `select count(*) from orders where status = 'CONFIRMED'`)
	fmt.Printf("\nbench-saga: %d orders offered at %.0f/s (no faults)\n", c.orders, c.rate)
	fmt.Printf("  accepted %d, terminal %d (confirmed %d), first created → last terminal %s\n",
		len(res.Created), len(lat), confirmed, span.Round(time.Millisecond))
	fmt.Printf("  throughput to terminal  %.0f orders/s\n", float64(len(lat))/span.Seconds())
	fmt.Printf("  order → terminal        p50 %s  p99 %s  max %s\n", loadgen.Percentile(lat, 50).Round(time.Millisecond),
		loadgen.Percentile(lat, 99).Round(time.Millisecond), loadgen.Percentile(lat, 100).Round(time.Millisecond))
	if len(lat) != c.orders {
		return fmt.Errorf("only %d of %d orders reached a terminal state", len(lat), c.orders)
	}
	return nil
}
