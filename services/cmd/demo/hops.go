package main

import (
	"context"
	"fmt"
	"time"

	"github.com/concordhq/concord/services/internal/loadgen"
)

// A hop is one leg of a choreographed order's way to its terminal state,
// between two times the services' databases record.
type hop struct {
	name     string
	from, to string // keys of a stamp map
}

// The choreographed saga's legs, in order. Every time is a transaction's
// start (now()) or, for published, the relay's mark after Kafka's ack.
var choreographedHops = []hop{
	{"order-svc: order → order.created published", "order", "created.pub"},
	{"inventory-svc applies order.created", "created.pub", "reserved"},
	{"inventory-svc: → inventory.reserved published", "reserved", "reserved.pub"},
	{"payment-svc records the payment", "reserved.pub", "payment"},
	{"payment-svc: charge → payment.processed", "payment", "processed"},
	{"payment.processed published", "processed", "processed.pub"},
	{"order-svc applies it: order terminal", "processed.pub", "terminal"},
}

// stampQueries read, per service, when each choreographed order passed a
// point of its way: order id → time.
var stampQueries = []struct {
	service, key, sql string
}{
	{"order-svc", "order", `select id::text, created_at from orders where flow = 'choreographed' and terminal_at is not null and created_at >= $1`},
	{"order-svc", "terminal", `select id::text, terminal_at from orders where flow = 'choreographed' and terminal_at is not null and created_at >= $1`},
	{"order-svc", "created.pub", `select aggregate_id, published_at from outbox where event_type = 'order.created' and published_at is not null and created_at >= $1`},
	{"inventory-svc", "reserved", `select order_id::text, created_at from reservations where created_at >= $1`},
	{"inventory-svc", "reserved.pub", `select aggregate_id, published_at from outbox where event_type = 'inventory.reserved' and published_at is not null and created_at >= $1`},
	{"payment-svc", "payment", `select order_id, created_at from payments where created_at >= $1`},
	{"payment-svc", "processed", `select aggregate_id, created_at from outbox where event_type = 'payment.processed' and created_at >= $1`},
	{"payment-svc", "processed.pub", `select aggregate_id, published_at from outbox where event_type = 'payment.processed' and published_at is not null and created_at >= $1`},
}

// printHops prints where a choreographed order's time went: p50 and p99
// of each leg over the orders created at or after from that passed every
// point. A leg's tail that stands out is where orders queue.
func printHops(ctx context.Context, r *running, from time.Time) error {
	stamps := map[string]map[string]time.Time{}
	for _, q := range stampQueries {
		rows, err := r.pools[q.service].Query(ctx, q.sql, from)
		if err != nil {
			return fmt.Errorf("%s: %w", q.service, err)
		}
		m := map[string]time.Time{}
		var id string
		var at time.Time
		for rows.Next() {
			if err := rows.Scan(&id, &at); err != nil {
				rows.Close()
				return err
			}
			m[id] = at
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		stamps[q.key] = m
	}
	legs := make([][]time.Duration, len(choreographedHops))
	for id := range stamps["order"] {
		complete := true
		for _, q := range stampQueries {
			if _, ok := stamps[q.key][id]; !ok {
				complete = false
			}
		}
		if !complete {
			continue
		}
		for i, h := range choreographedHops {
			legs[i] = append(legs[i], stamps[h.to][id].Sub(stamps[h.from][id]))
		}
	}
	if len(legs[0]) == 0 {
		return nil
	}
	fmt.Printf("  where a choreographed order's time goes (%d orders; from the services' tables):\n", len(legs[0]))
	for i, h := range choreographedHops {
		fmt.Printf("    %-48s p50 %6.1f ms  p99 %6.1f ms\n", h.name, ms(loadgen.Percentile(legs[i], 50)), ms(loadgen.Percentile(legs[i], 99)))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
