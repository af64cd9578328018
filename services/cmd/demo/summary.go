package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/services/audit"
	"github.com/concordhq/concord/services/audit/auditsnapshot"
	"github.com/concordhq/concord/services/internal/loadgen"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/shipping/carriersim"
)

func collect[K comparable, V any](ctx context.Context, r *running, pool, sql string) (map[K]V, error) {
	rows, err := r.pools[pool].Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pool, err)
	}
	out := map[K]V{}
	for rows.Next() {
		var k K
		var v V
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

func count(ctx context.Context, r *running, pool, sql string, args ...any) int64 {
	var n int64
	if err := r.pools[pool].QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return -1
	}
	return n
}

func summary(ctx context.Context, r *running, c config, initial map[string]int64, res loadgen.Result, rl *rail) (bool, error) {
	fmt.Println("\nSummary")
	// Orders by outcome.
	rows, err := r.pools["order-svc"].Query(ctx, `select status, coalesce(reason, ''), count(*) from orders group by 1, 2 order by 1, 3 desc`)
	if err != nil {
		return false, err
	}
	type line struct {
		Status, Reason string
		N              int64
	}
	outcomes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[line])
	if err != nil {
		return false, err
	}
	fmt.Printf("  orders          %d placed\n", count(ctx, r, "order-svc", `select count(*) from orders`))
	for _, o := range outcomes {
		label := o.Status
		if o.Reason != "" {
			label += " (" + o.Reason + ")"
		}
		fmt.Printf("    %-34s %5d\n", label, o.N)
	}

	// Events per topic, from the brokers' end offsets.
	topics, _ := r.adm.ListTopics(ctx)
	var names []string
	for _, t := range topics.Names() {
		if strings.HasPrefix(t, c.prefix) {
			names = append(names, t)
		}
	}
	sort.Strings(names)
	ends, err := r.adm.ListEndOffsets(ctx, names...)
	if err == nil {
		fmt.Println("  events per topic")
		for _, t := range names {
			var n int64
			for _, o := range ends[t] {
				n += o.Offset
			}
			if n == 0 && strings.HasSuffix(t, ".dlq") {
				continue // an empty dead-letter topic is the good news
			}
			fmt.Printf("    %-34s %5d\n", strings.TrimPrefix(t, c.prefix), n)
		}
	}
	// A type may be appended by several services (saga.step_replied by
	// every participant): one line per type.
	byType := map[string]int64{}
	for _, db := range []string{"order-svc", "inventory-svc", "payment-svc", "shipping-svc", "orchestrator", "funding-svc"} {
		if r.pools[db] == nil {
			continue // funding-svc without the rail
		}
		m, err := collect[string, int64](ctx, r, db, `select event_type, count(*) from outbox group by 1`)
		if err != nil {
			return false, err
		}
		for t, n := range m {
			byType[t] += n
		}
	}
	types := make([]string, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	fmt.Println("  events by type")
	for _, t := range types {
		fmt.Printf("    %-34s %5d\n", t, byType[t])
	}

	// Faults the provider injected and what absorbed them.
	var stats map[string]int64
	if resp, err := http.Get(r.sim + "/__admin/stats"); err == nil {
		_ = json.NewDecoder(resp.Body).Decode(&stats)
		resp.Body.Close()
	}
	webhookDupes := count(ctx, r, "payment-svc", `select coalesce(sum(deliveries - 1), 0) from provider_events`)
	// Every record a consumer took, by the runner's outcome label: a
	// duplicate is a redelivery (rebalance, restart) that dedupe turned
	// into a no-op.
	consumed := map[string]int64{}
	for _, u := range []string{r.ops["order-svc"], r.ops["inventory-svc"], r.ops["payment-svc"], r.ops["shipping-svc"], r.ops["orchestrator"]} {
		for outcome, n := range scrapeBy(u+"/metrics", "concord_consumer_events_total", "outcome") {
			consumed[outcome] += n
		}
	}
	fmt.Println("  faults and how they were absorbed")
	fmt.Printf("    %-34s %5d\n", "provider 5xx / 429 answers", stats["injected_5xx"]+stats["injected_429"]+stats["rate_limited"])
	fmt.Printf("    %-34s %5d\n", "webhooks dropped by the provider", stats["webhooks_dropped"])
	fmt.Printf("    %-34s %5d\n", "webhooks duplicated by the provider", stats["webhooks_duplicated"])
	fmt.Printf("    %-34s %5d\n", "webhooks reordered / delayed", stats["webhooks_reordered"]+stats["webhooks_delayed"])
	fmt.Printf("    %-34s %5d\n", "duplicate webhooks absorbed", webhookDupes)
	fmt.Printf("    %-34s %5d (of %d records consumed)\n", "duplicate Kafka records absorbed", consumed[idempotent.OutcomeDuplicate],
		consumed[idempotent.OutcomeApplied]+consumed[idempotent.OutcomeDuplicate]+consumed[idempotent.OutcomeDeadLettered]+consumed[idempotent.OutcomeIgnored])
	fmt.Printf("    %-34s %5d\n", "records dead-lettered", consumed[idempotent.OutcomeDeadLettered])
	fmt.Printf("    %-34s %5d\n", "payments retried after no answer", count(ctx, r, "payment-svc", `select count(*) from payments where attempts > 1`))
	if c.recheck > 0 {
		fmt.Printf("    %-34s %5d\n", "payments settled by polling", count(ctx, r, "payment-svc", `select count(*) from payment_transitions where source = 'get'`))
	}
	fmt.Printf("    %-34s %5d\n", "payments settled by webhook", count(ctx, r, "payment-svc", `select count(*) from payment_transitions where source like 'webhook:%'`))
	fmt.Printf("    %-34s %5d\n", "payments settled by the reconciler", count(ctx, r, "payment-svc", `select count(*) from payment_transitions where source like 'reconciler:%'`))
	fmt.Printf("    %-34s %5d\n", "refunds of cancelled orders", count(ctx, r, "payment-svc", `select count(*) from payments where status = 'refunded'`))
	var carrier carriersim.Stats
	if resp, err := http.Get(r.carrier + "/__admin/stats"); err == nil {
		_ = json.NewDecoder(resp.Body).Decode(&carrier)
		resp.Body.Close()
	}
	fmt.Printf("    %-34s %5d\n", "shipments declined by the carrier", carrier.Declined)
	fmt.Printf("    %-34s %5d\n", "carrier 5xx answers", carrier.Injected5xx)
	fmt.Printf("    %-34s %5d\n", "carrier answers withheld", carrier.Hung)
	fmt.Printf("    %-34s %5d\n", "shipments found again by their key", carrier.IdempotentReplays)
	fmt.Printf("    %-34s %5d\n", "saga commands sent again", count(ctx, r, "orchestrator",
		`select coalesce(sum(greatest(attempts - 1, 0) + greatest(compensation_attempts - 1, 0)), 0) from saga_steps`))

	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: apiKey, BaseURL: r.sim})
	if err != nil {
		return false, err
	}
	snap, err := auditsnapshot.Read(ctx, r.sources(gw))
	if err != nil {
		return false, err
	}
	checks := audit.Saga(snap, c.bound, initial)
	if err := sagaSummary(ctx, r); err != nil {
		return false, err
	}
	if r.recURL != "" {
		if err := reconcilerSummary(ctx, r, c); err != nil {
			return false, err
		}
		checks = append(checks, audit.Reconciliation(snap)...)
	}
	if rl != nil {
		rs, err := rl.snapshot(ctx)
		if err != nil {
			return false, err
		}
		rl.summary(ctx, rs)
		checks = append(checks, audit.Rail(rs)...)
	}
	fmt.Println("\nInvariants")
	all := true
	for _, ch := range checks {
		mark := "PASS"
		if !ch.Holds() {
			mark, all = "FAIL", false
		}
		fmt.Printf("  %s  %s", mark, ch.Check)
		if d := ch.Detail(); d != "" {
			fmt.Printf(" — %s", d)
		}
		fmt.Println()
	}
	return all, nil
}

// scrapeBy sums the samples of a metric by the value of one label.
func scrapeBy(url, metric, label string) map[string]int64 {
	out := map[string]int64{}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	key := label + `="`
	for sc.Scan() {
		l := sc.Text()
		labels, ok := strings.CutPrefix(l, metric+"{")
		if !ok {
			continue
		}
		_, v, ok := strings.Cut(labels, key)
		if !ok {
			continue
		}
		value, _, _ := strings.Cut(v, `"`)
		f := strings.Fields(l)
		n, _ := strconv.ParseFloat(f[len(f)-1], 64)
		out[value] += int64(n)
	}
	return out
}
