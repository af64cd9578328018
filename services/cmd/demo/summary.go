package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/services/internal/loadgen"
	"github.com/concordhq/concord/services/payment/paymentprovider"
)

type check struct {
	name   string
	ok     bool
	detail string
}

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

// providerTruth lists every PaymentIntent the provider holds and maps the
// order in its metadata to its status.
func providerTruth(ctx context.Context, r *running, since time.Time) (map[string][]paymentprovider.Payment, error) {
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: apiKey, BaseURL: r.sim})
	if err != nil {
		return nil, err
	}
	out := map[string][]paymentprovider.Payment{}
	cursor := ""
	for {
		var page paymentprovider.Page[paymentprovider.Payment]
		// The provider's injected 5xx answers reach this check too; a
		// listing is read-only, so asking again is safe.
		for attempt := 0; ; attempt++ {
			page, err = gw.ListCreated(ctx, since.Add(-time.Minute), time.Now().Add(time.Minute), cursor, 100)
			if err == nil || !errors.Is(err, paymentprovider.ErrUnavailable) || attempt == 9 {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		for _, p := range page.Items {
			out[p.Metadata["order_id"]] = append(out[p.Metadata["order_id"]], p)
		}
		if !page.HasMore {
			return out, nil
		}
		cursor = page.Next
	}
}

func summary(ctx context.Context, r *running, c config, initial map[string]int64, res loadgen.Result) (bool, error) {
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
	var byType []struct {
		db, typ string
		n       int64
	}
	for _, db := range []string{"order-svc", "inventory-svc", "payment-svc"} {
		m, err := collect[string, int64](ctx, r, db, `select event_type, count(*) from outbox group by 1`)
		if err != nil {
			return false, err
		}
		for t, n := range m {
			byType = append(byType, struct {
				db, typ string
				n       int64
			}{db, t, n})
		}
	}
	sort.Slice(byType, func(i, j int) bool { return byType[i].typ < byType[j].typ })
	fmt.Println("  events by type")
	for _, b := range byType {
		fmt.Printf("    %-34s %5d\n", b.typ, b.n)
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
	for _, u := range []string{r.orderURL, r.invURL, r.payURL} {
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

	checks, err := invariants(ctx, r, c, initial)
	if err != nil {
		return false, err
	}
	if r.recURL != "" {
		rc, err := reconcilerSummary(ctx, r, c)
		if err != nil {
			return false, err
		}
		checks = append(checks, rc...)
	}
	fmt.Println("\nInvariants")
	all := true
	for _, ch := range checks {
		mark := "PASS"
		if !ch.ok {
			mark, all = "FAIL", false
		}
		fmt.Printf("  %s  %s", mark, ch.name)
		if ch.detail != "" {
			fmt.Printf(" — %s", ch.detail)
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

func invariants(ctx context.Context, r *running, c config, initial map[string]int64) ([]check, error) {
	var out []check
	add := func(name string, ok bool, format string, args ...any) {
		out = append(out, check{name, ok, fmt.Sprintf(format, args...)})
	}
	orders, err := collect[string, string](ctx, r, "order-svc", `select id::text, status from orders`)
	if err != nil {
		return nil, err
	}
	var firstCreated time.Time
	_ = r.pools["order-svc"].QueryRow(ctx, `select coalesce(min(created_at), now()) from orders`).Scan(&firstCreated)

	// 1. Every order terminal within the bound.
	open := count(ctx, r, "order-svc", `select count(*) from orders where status not in ('CONFIRMED', 'CANCELLED')`)
	var slowest time.Duration
	_ = r.pools["order-svc"].QueryRow(ctx, `select coalesce(max(terminal_at - created_at), '0') from orders`).Scan(&slowest)
	add(fmt.Sprintf("every order terminal within %s", c.bound), open == 0 && slowest <= c.bound,
		"%d not terminal, slowest took %s", open, slowest.Round(time.Millisecond))

	payments, err := collect[string, string](ctx, r, "payment-svc", `select order_id, status from payments`)
	if err != nil {
		return nil, err
	}
	reservations, err := collect[string, string](ctx, r, "inventory-svc", `select order_id::text, status from reservations`)
	if err != nil {
		return nil, err
	}
	truth, err := providerTruth(ctx, r, firstCreated)
	if err != nil {
		return nil, fmt.Errorf("read the provider's payments: %w", err)
	}

	// 2. confirmed ⇔ a succeeded provider payment and committed stock.
	var bad []string
	for id, st := range orders {
		ps := truth[id]
		succeeded := len(ps) == 1 && ps[0].Status == paymentprovider.StatusSucceeded
		confirmedSide := payments[id] == "paid" && succeeded && reservations[id] == "COMMITTED"
		if (st == "CONFIRMED") != confirmedSide {
			bad = append(bad, fmt.Sprintf("%s %s (payment %q, provider %v, reservation %q)", id, st, payments[id], statuses(ps), reservations[id]))
		}
		if len(ps) > 1 {
			bad = append(bad, fmt.Sprintf("%s has %d provider payments", id, len(ps)))
		}
	}
	add("confirmed ⇔ succeeded provider payment and committed stock", len(bad) == 0, "%s", firstFew(bad, len(orders)))

	// 3. cancelled ⇒ no net charge and the reservation released.
	bad = bad[:0]
	for id, st := range orders {
		if st != "CANCELLED" {
			continue
		}
		for _, p := range truth[id] {
			if p.Status == paymentprovider.StatusSucceeded || p.Status == paymentprovider.StatusProcessing || p.Status == paymentprovider.StatusPending {
				bad = append(bad, fmt.Sprintf("%s cancelled but provider payment %s is %s", id, p.ProviderID, p.Status))
			}
		}
		if rs := reservations[id]; rs != "" && rs != "RELEASED" && rs != "REJECTED" {
			bad = append(bad, fmt.Sprintf("%s cancelled but reservation %s", id, rs))
		}
		if ps := payments[id]; ps == "paid" || ps == "pending" {
			bad = append(bad, fmt.Sprintf("%s cancelled but payment %s", id, ps))
		}
	}
	add("cancelled ⇒ no net charge and reservation released", len(bad) == 0, "%s", firstFew(bad, -1))

	// 4. Stock: never negative, initial = available + reserved + committed,
	// and committed = what confirmed orders bought.
	type stock struct {
		SKU                                    string
		Received, Available, Reserved, Committ int64
	}
	rows, err := r.pools["inventory-svc"].Query(ctx, `select sku, received, available, reserved, committed from stock`)
	if err != nil {
		return nil, err
	}
	stocks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stock])
	if err != nil {
		return nil, err
	}
	bought, err := collect[string, int64](ctx, r, "order-svc", `select i->>'sku', sum((i->>'quantity')::bigint)
		from orders, jsonb_array_elements(items) i where status = 'CONFIRMED' group by 1`)
	if err != nil {
		return nil, err
	}
	bad = bad[:0]
	var totalAvail, totalCommitted int64
	for _, s := range stocks {
		totalAvail += s.Available
		totalCommitted += s.Committ
		switch {
		case s.Available < 0 || s.Reserved < 0 || s.Committ < 0:
			bad = append(bad, fmt.Sprintf("%s negative: %+v", s.SKU, s))
		case s.Available+s.Reserved+s.Committ != initial[s.SKU]:
			bad = append(bad, fmt.Sprintf("%s: %d+%d+%d ≠ initial %d", s.SKU, s.Available, s.Reserved, s.Committ, initial[s.SKU]))
		case s.Committ != bought[s.SKU]:
			bad = append(bad, fmt.Sprintf("%s: committed %d, confirmed orders bought %d", s.SKU, s.Committ, bought[s.SKU]))
		}
	}
	add("stock never negative; initial = available + reserved + committed", len(bad) == 0 && len(stocks) == len(initial),
		"%d SKUs, %d units committed, %d available%s", len(stocks), totalCommitted, totalAvail, prefixed(firstFew(bad, -1)))

	// 5. No event applied twice: at most one outcome event per order and
	// transition, and no transition recorded twice.
	dupes := count(ctx, r, "order-svc", `select count(*) from (select aggregate_id from outbox
		where event_type in ('order.confirmed', 'order.cancelled') group by 1 having count(*) > 1) d`) +
		count(ctx, r, "order-svc", `select count(*) - count(distinct event_id) from order_history`) +
		count(ctx, r, "inventory-svc", `select count(*) from (select aggregate_id, event_type from outbox group by 1, 2 having count(*) > 1) d`) +
		count(ctx, r, "payment-svc", `select count(*) from (select payment_id, to_status from payment_transitions group by 1, 2 having count(*) > 1) d`) +
		count(ctx, r, "payment-svc", `select count(*) from (select aggregate_id, event_type from outbox group by 1, 2 having count(*) > 1) d`)
	add("no event applied twice", dupes == 0, "%d duplicate effects", dupes)
	return out, nil
}

func statuses(ps []paymentprovider.Payment) []string {
	var s []string
	for _, p := range ps {
		s = append(s, string(p.Status))
	}
	return s
}

func firstFew(bad []string, total int) string {
	if len(bad) == 0 {
		if total >= 0 {
			return fmt.Sprintf("%d orders checked against the provider", total)
		}
		return ""
	}
	if len(bad) > 3 {
		return fmt.Sprintf("%d violations, e.g. %s", len(bad), strings.Join(bad[:3], "; "))
	}
	return strings.Join(bad, "; ")
}

func prefixed(s string) string {
	if s == "" {
		return ""
	}
	return "; " + s
}
