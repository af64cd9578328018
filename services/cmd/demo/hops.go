package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/services/internal/loadgen"
)

// A hop is one leg of an order's way to its terminal state, between two
// times the services' databases record.
type hop struct {
	name     string
	from, to string // keys of a stamp map
}

// A stamp query reads, from one service's database, when each order of the
// run passed a point of its way: order id → time.
type stamp struct {
	service, key, sql string
	arg               any // $2 of sql, when it has one
}

func at(service, key, sql string) stamp { return stamp{service: service, key: key, sql: sql} }

// legs are the points of a flow's way and the hops between them.
type legs struct {
	title  string
	stamps []stamp
	hops   []hop
}

// The choreographed saga's legs, in order. Every time is a transaction's
// start (now()) or, for published, the relay's mark after Kafka's ack.
var choreographed = legs{
	title: "a choreographed order",
	stamps: []stamp{
		at("order-svc", "order", `select id::text, created_at from orders where flow = 'choreographed' and terminal_at is not null and created_at >= $1`),
		at("order-svc", "terminal", `select id::text, terminal_at from orders where flow = 'choreographed' and terminal_at is not null and created_at >= $1`),
		at("order-svc", "created.pub", `select aggregate_id, published_at from outbox where event_type = 'order.created' and published_at is not null and created_at >= $1`),
		at("inventory-svc", "reserved", `select order_id::text, created_at from reservations where created_at >= $1`),
		at("inventory-svc", "reserved.pub", `select aggregate_id, published_at from outbox where event_type = 'inventory.reserved' and published_at is not null and created_at >= $1`),
		at("payment-svc", "payment", `select order_id, created_at from payments where created_at >= $1`),
		at("payment-svc", "processed", `select aggregate_id, created_at from outbox where event_type = 'payment.processed' and created_at >= $1`),
		at("payment-svc", "processed.pub", `select aggregate_id, published_at from outbox where event_type = 'payment.processed' and published_at is not null and created_at >= $1`),
	},
	hops: []hop{
		{"order-svc: order → order.created published", "order", "created.pub"},
		{"inventory-svc applies order.created", "created.pub", "reserved"},
		{"inventory-svc: → inventory.reserved published", "reserved", "reserved.pub"},
		{"payment-svc records the payment", "reserved.pub", "payment"},
		{"payment-svc: charge → payment.processed", "payment", "processed"},
		{"payment.processed published", "processed", "processed.pub"},
		{"order-svc applies it: order terminal", "processed.pub", "terminal"},
	},
}

// orchestrated is the orchestrated saga's legs: to the saga's start, then
// each step from the one before it to its reply applied (a command and its
// reply, each through an outbox, a relay and a consumer), then to the
// order's terminal state. The steps are read from the orchestrator's table,
// in their order.
func orchestrated(ctx context.Context, r *running) (legs, error) {
	l := legs{
		title: "an orchestrated order",
		stamps: []stamp{
			at("order-svc", "order", `select id::text, created_at from orders where flow = 'orchestrated' and terminal_at is not null and created_at >= $1`),
			at("order-svc", "terminal", `select id::text, terminal_at from orders where flow = 'orchestrated' and terminal_at is not null and created_at >= $1`),
			at("orchestrator", "started", `select order_id, started_at from saga_executions where started_at >= $1`),
		},
		hops: []hop{{"order-svc → orchestrator starts the saga", "order", "started"}},
	}
	rows, err := r.pools["orchestrator"].Query(ctx, `select distinct step_order, step_name from saga_steps order by step_order`)
	if err != nil {
		return l, err
	}
	var order int32
	var name string
	prev := "started"
	_, err = pgx.ForEachRow(rows, []any{&order, &name}, func() error {
		l.stamps = append(l.stamps, stamp{service: "orchestrator", key: name, arg: order, sql: `select e.order_id, s.executed_at from saga_steps s
			join saga_executions e on e.saga_id = s.execution_id
			where s.step_order = $2 and s.executed_at is not null and e.started_at >= $1`})
		l.hops = append(l.hops, hop{"step " + name + ": command → reply applied", prev, name})
		prev = name
		return nil
	})
	l.hops = append(l.hops, hop{"order-svc applies it: order terminal", prev, "terminal"})
	return l, err
}

// printLegs prints where a flow's orders spent their time: p50 and p99 of
// each leg over the orders created at or after from that passed every
// point. A leg whose p50 stands out is where orders queue.
func printLegs(ctx context.Context, r *running, from time.Time, l legs) error {
	stamps := map[string]map[string]time.Time{}
	for _, q := range l.stamps {
		args := []any{from}
		if q.arg != nil {
			args = append(args, q.arg)
		}
		rows, err := r.pools[q.service].Query(ctx, q.sql, args...)
		if err != nil {
			return fmt.Errorf("%s: %w", q.service, err)
		}
		m := map[string]time.Time{}
		var id string
		var when time.Time
		_, err = pgx.ForEachRow(rows, []any{&id, &when}, func() error { m[id] = when; return nil })
		if err != nil {
			return fmt.Errorf("%s: %w", q.service, err)
		}
		stamps[q.key] = m
	}
	spans := make([][]time.Duration, len(l.hops))
	for id := range stamps[l.stamps[0].key] {
		if slices.ContainsFunc(l.stamps, func(q stamp) bool { _, ok := stamps[q.key][id]; return !ok }) {
			continue // not past every point
		}
		for i, h := range l.hops {
			spans[i] = append(spans[i], stamps[h.to][id].Sub(stamps[h.from][id]))
		}
	}
	if len(spans[0]) == 0 {
		return nil
	}
	fmt.Printf("  where %s's time goes (%d orders; from the services' tables):\n", l.title, len(spans[0]))
	for i, h := range l.hops {
		fmt.Printf("    %-48s p50 %7.1f ms  p99 %7.1f ms\n", h.name, ms(loadgen.Percentile(spans[i], 50)), ms(loadgen.Percentile(spans[i], 99)))
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
