package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/services/reconciler"
)

// startReconciler runs `reconciler run` against the payments database and
// provider-sim, on the demo's topic prefix so its repair commands land on
// the payment-commands topic payment-svc consumes. It starts after
// payment-svc is ready: both migrate the payments database, and payment-svc
// creates the topic.
func startReconciler(ctx context.Context, r *running, c config, port int) error {
	r.recURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	p, err := start(c.binDir, c.logDir, "reconciler", []string{
		"CONCORD_DATABASE_URL=" + c.dbURLs["payment-svc"], "CONCORD_PROVIDER_URL=" + r.sim, "CONCORD_PROVIDER_API_KEY=" + apiKey,
		"CONCORD_TOPIC_PREFIX=" + c.prefix, "CONCORD_HTTP_ADDR=" + fmt.Sprintf("127.0.0.1:%d", port),
		"CONCORD_INTERVAL=" + c.reconcileEvery.String(), "CONCORD_BACKOFF=" + c.reconcileEvery.String(),
		"CONCORD_GRACE=" + c.reconcileGrace.String(),
		// The scheduled heal re-reads days of provider events; the scan
		// alone finds what this run's faults leave behind.
		"CONCORD_HEAL_EVERY=0", "CONCORD_LOG_FORMAT=json",
	}, "run")
	if err != nil {
		return err
	}
	r.procs = append(r.procs, p)
	return p.WaitReady(ctx, r.recURL+"/readyz", 30*time.Second)
}

// reconcilerSummary prints what the reconciler saw and did, from its
// findings table (durable, exact) and its metrics (rows per verdict). The
// checks of its work are audit.Reconciliation's.
func reconcilerSummary(ctx context.Context, r *running, c config) error {
	pay := r.pools["payment-svc"]
	fmt.Printf("  reconciler (a full cycle every %s; payments changed in the last %s are left alone)\n", c.reconcileEvery, c.reconcileGrace)
	if c.recheck > 0 {
		fmt.Printf("    payment-svc's pending-payment poller is on (%s): it may settle dropped-webhook payments first\n", c.recheck)
	} else {
		fmt.Println("    payment-svc's pending-payment poller is off: a processing payment whose success webhook")
		fmt.Println("    was dropped stays pending until the reconciler finds it")
	}
	var cycles int64
	_ = pay.QueryRow(ctx, `select coalesce(sum(cycles_completed), 0) from reconciliation_cursor`).Scan(&cycles)
	fmt.Printf("    %-34s %5d\n", "full cycles over every payment", cycles)
	verdicts := scrapeBy(r.recURL+"/metrics", "concord_reconciler_verdicts_total", "verdict")
	var parts []string
	for _, v := range reconciler.Verdicts {
		parts = append(parts, fmt.Sprintf("%s %d", v, verdicts[string(v)]))
	}
	fmt.Printf("    rows checked: %s\n", strings.Join(parts, ", "))

	rows, err := pay.Query(ctx, `select verdict, kind, count(*),
			count(*) filter (where command_event_id is not null),
			count(*) filter (where resolution = 'repaired'),
			count(*) filter (where resolution = 'already_applied'),
			count(*) filter (where resolution = 'superseded'),
			count(*) filter (where resolved_at is null)
		from reconciliation_findings group by 1, 2 order by 1 desc, 2`)
	if err != nil {
		return fmt.Errorf("payment-svc findings: %w", err)
	}
	type kindLine struct {
		Verdict, Kind                                    string
		Found, Commands, Repaired, Already, Supers, Open int64
	}
	lines, err := pgx.CollectRows(rows, pgx.RowToStructByPos[kindLine])
	if err != nil {
		return err
	}
	var t kindLine
	fmt.Println("    drift found (findings, by verdict / kind)")
	for _, l := range lines {
		fmt.Printf("      %-32s %5d\n", l.Verdict+" / "+l.Kind, l.Found)
		t.Found += l.Found
		t.Commands += l.Commands
		t.Repaired += l.Repaired
		t.Already += l.Already
		t.Supers += l.Supers
		if l.Verdict == string(reconciler.NeedsReview) {
			t.Open += l.Open
		}
	}
	if len(lines) == 0 {
		fmt.Printf("      %-32s %5d\n", "none", 0)
	}
	fmt.Printf("    %-34s %5d\n", "repair commands emitted", t.Commands)
	fmt.Printf("    %-34s %5d\n", "applied by payment-svc: repaired", t.Repaired)
	fmt.Printf("    %-34s %5d\n", "  already applied (webhook first)", t.Already)
	fmt.Printf("    %-34s %5d\n", "  superseded", t.Supers)
	fmt.Printf("    %-34s %5d\n", "open needs_review findings", t.Open)
	return nil
}
