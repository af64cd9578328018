// Command reconciler compares the payments database with the payment
// provider, records every drift once as a finding, and emits repair commands
// for the drifts that are safe to heal (payment-svc applies them).
//
//	reconciler run                       scan in a loop (plus a scheduled heal), serve /metrics
//	reconciler once                      finish the current cycle and print its summary
//	reconciler status                    lag, cycles, open findings by kind
//	reconciler heal --since T --until T  re-pull provider events for a window
//	reconciler findings list|show ID|resolve ID --note "…"
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/time/rate"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerprovider"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

func main() { kit.Main("reconciler", run) }

const usage = `usage: reconciler <command> [flags]

commands:
  run        scan every payment in a loop, heal on a schedule, serve /metrics
  once       finish the current cycle, print its summary and exit
  status     reconciliation lag, cycles and open findings by kind
  heal       re-pull the provider's events for --since..--until and repair what was missed
  findings   list | show ID | resolve ID --note "what was done"

Run "reconciler <command> --help" for its flags.`

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return kit.Usagef("no command\n%s", usage)
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run", "once", "status", "heal":
		return runCommand(ctx, cmd, rest, os.Stdout)
	case "findings":
		return findings(ctx, rest, os.Stdout)
	case "-h", "--help", "help":
		fmt.Println(usage)
		return nil
	}
	return kit.Usagef("unknown command %q\n%s", cmd, usage)
}

// common are the flags every command takes.
type common struct {
	fs       *kit.FlagSet
	dbURL    *string
	log      kit.LogFlags
	job      *string
	apiKey   *string
	baseURL  *string
	timeout  *time.Duration
	limit    *float64
	share    *float64
	batch    *int
	grace    *time.Duration
	list     *bool
	skew     *time.Duration
	conc     *int
	idle     *time.Duration
	backoff  *time.Duration
	addr     *string
	healEach *time.Duration
	healWin  *time.Duration
	since    *string
	until    *string
	prefix   *string
}

func flags(cmd string) *common {
	c := &common{fs: kit.NewFlagSet("reconciler "+cmd, "reconciler "+cmd+": compare payments with the provider, record findings, emit repair commands.")}
	fs := c.fs
	c.dbURL = fs.String("database-url", "PAYMENTS_DATABASE_URL", "", "payments database URL")
	c.log = kit.AddLogFlags(fs)
	c.job = fs.String("job", "RECONCILER_JOB", reconciler.DefaultJob, "cursor name; replicas on one job share the work")
	if cmd == "status" || strings.HasPrefix(cmd, "findings") {
		return c
	}
	c.apiKey = fs.String("provider-api-key", "PROVIDER_API_KEY", "", "provider secret key (sk_test_…)")
	c.baseURL = fs.String("provider-url", "PROVIDER_URL", "", "provider API base URL (empty: Stripe itself)")
	c.timeout = fs.Duration("provider-timeout", "PROVIDER_TIMEOUT", 10*time.Second, "bound of one provider call")
	c.limit = fs.Float("provider-rate-limit", "PROVIDER_RATE_LIMIT", 25, "the provider's rate limit in requests/s (Stripe test mode: 25)")
	c.share = fs.Float("rate-share", "RECONCILER_RATE_SHARE", 0.5, "share of --provider-rate-limit the reconciler may use (the rest is left to live traffic)")
	c.batch = fs.Int("batch", "RECONCILER_BATCH", reconciler.DefaultBatch, "payments per keyset page")
	c.grace = fs.Duration("grace", "RECONCILER_GRACE", reconciler.DefaultGrace, "rows updated more recently are in flight and not judged")
	c.list = fs.Bool("list-verification", "RECONCILER_LIST_VERIFICATION", true, "verify up to 100 rows per call by listing the provider's payments by creation window")
	c.skew = fs.Duration("list-skew", "RECONCILER_LIST_SKEW", reconciler.DefaultListSkew, "widening of the creation window on both sides")
	c.conc = fs.Int("concurrency", "RECONCILER_CONCURRENCY", reconciler.DefaultConcurrency, "per-row provider calls in flight")
	c.prefix = fs.String("topic-prefix", "CONCORD_TOPIC_PREFIX", "", "prefix of the payment-commands topic (match payment-svc's --topic-prefix)")
	switch cmd {
	case "run":
		c.idle = fs.Duration("interval", "RECONCILER_INTERVAL", time.Minute, "pause between cycles")
		c.backoff = fs.Duration("backoff", "RECONCILER_BACKOFF", 30*time.Second, "pause after a provider outage or an error")
		c.addr = fs.String("addr", "RECONCILER_ADDR", ":9095", "listen address of /metrics, /healthz and /readyz")
		c.healEach = fs.Duration("heal-every", "RECONCILER_HEAL_EVERY", time.Hour, "how often the scheduled heal runs (0: never)")
		c.healWin = fs.Duration("heal-window", "RECONCILER_HEAL_WINDOW", reconciler.DefaultHealWindow, "how far back the scheduled heal re-reads; longer than the longest expected outage")
	case "heal":
		c.since = fs.String("since", "", "", "window start, RFC 3339 or a duration back from now (e.g. 72h)")
		c.until = fs.String("until", "", "", "window end, RFC 3339 or a duration back from now (default: now)")
	}
	return c
}

// deps is what a command needs, built from its flags.
type deps struct {
	log     *slog.Logger
	pool    *pgxpool.Pool
	store   *reconcilerstore.Store
	prov    *reconcilerprovider.Provider
	limiter *rate.Limiter
}

func (c *common) open(ctx context.Context, cmd string) (*deps, error) {
	if err := kit.Require("database-url", *c.dbURL); err != nil {
		return nil, kit.UsageError{Err: err}
	}
	log, err := c.log.NewLogger(os.Stderr, "reconciler")
	if err != nil {
		return nil, kit.UsageError{Err: err}
	}
	d := &deps{log: log}
	if c.apiKey != nil {
		if err := kit.Require("provider-api-key", *c.apiKey); err != nil {
			return nil, kit.UsageError{Err: err}
		}
		if *c.limit <= 0 || *c.share <= 0 || *c.share > 1 {
			return nil, kit.Usagef("--provider-rate-limit must be > 0 and --rate-share in (0, 1]")
		}
		gw, err := paymentprovider.New(paymentprovider.Config{APIKey: *c.apiKey, BaseURL: *c.baseURL, Timeout: *c.timeout})
		if err != nil {
			return nil, kit.UsageError{Err: err}
		}
		d.prov = reconcilerprovider.New(gw)
		// Burst 1: the share is a steady pace, never a spike that eats
		// live traffic's part of the provider's limit.
		d.limiter = rate.NewLimiter(rate.Limit(*c.limit**c.share), 1)
	}
	d.pool, err = kit.NewPool(ctx, *c.dbURL)
	if err != nil {
		return nil, err
	}
	// The reconciler's tables reference payments and write to the outbox,
	// so their migrations go first; all three are idempotent.
	for _, m := range []func(context.Context, *pgxpool.Pool) error{outbox.Migrate, paymentstore.Migrate, reconcilerstore.Migrate} {
		if err := m(ctx, d.pool); err != nil {
			d.pool.Close()
			return nil, fmt.Errorf("migrate: %w", err)
		}
	}
	d.store = reconcilerstore.New(d.pool)
	if c.prefix != nil {
		// Commands land where a side-by-side payment-svc consumes them.
		d.store.Outbox = outbox.Writer{TopicPrefix: *c.prefix}
	}
	return d, nil
}

func (c *common) scanner(d *deps, m *reconciler.Metrics) (*reconciler.Scanner, error) {
	cfg := reconciler.ScannerConfig{Job: *c.job, Store: d.store, Provider: d.prov, Batch: *c.batch, Grace: *c.grace,
		ListSkew: *c.skew, Limiter: d.limiter, Concurrency: *c.conc, Metrics: m, Logger: d.log}
	if *c.list {
		cfg.Lister = d.prov
	}
	return reconciler.NewScanner(cfg)
}

func (c *common) healer(d *deps, m *reconciler.Metrics) (*reconciler.Healer, error) {
	return reconciler.NewHealer(reconciler.HealerConfig{Store: d.store, Events: d.prov, Provider: d.prov, Grace: *c.grace,
		Limiter: d.limiter, Metrics: m, Logger: d.log})
}

func runCommand(ctx context.Context, cmd string, args []string, out io.Writer) error {
	c := flags(cmd)
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	var since, until time.Time
	if cmd == "heal" {
		var err error
		if since, until, err = window(*c.since, *c.until, time.Now()); err != nil {
			return kit.UsageError{Err: err}
		}
	}
	d, err := c.open(ctx, cmd)
	if err != nil {
		return err
	}
	defer d.pool.Close()
	switch cmd {
	case "status":
		st, err := d.store.Status(ctx)
		if err != nil {
			return err
		}
		printStatus(out, st)
		return nil
	case "once":
		s, err := c.scanner(d, nil)
		if err != nil {
			return err
		}
		rep, err := s.RunCycle(ctx)
		printCycle(out, rep)
		return err
	case "heal":
		h, err := c.healer(d, nil)
		if err != nil {
			return err
		}
		rep, err := h.Heal(ctx, since, until)
		printHeal(out, rep)
		return err
	}
	return serve(ctx, c, d)
}

// serve is `reconciler run`: the scan loop, the scheduled heal and the
// metrics refresher, until SIGTERM. A batch in flight finishes its record
// transaction or rolls back as a whole, so stopping never loses a finding
// half-written.
func serve(ctx context.Context, c *common, d *deps) error {
	ops, err := kit.NewOpsServer(*c.addr, func(ctx context.Context) error { return d.pool.Ping(ctx) })
	if err != nil {
		return err
	}
	m := reconciler.NewMetrics(ops.Registry)
	s, err := c.scanner(d, m)
	if err != nil {
		return err
	}
	h, err := c.healer(d, m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 4)
	go func() { errc <- ops.Run(ctx, d.log, 5*time.Second) }()
	go func() { errc <- s.Run(ctx, *c.idle, *c.backoff) }()
	go func() { errc <- every(ctx, 15*time.Second, func() { refresh(ctx, d, m, *c.job) }) }()
	if *c.healEach > 0 {
		go func() {
			errc <- every(ctx, *c.healEach, func() {
				now := time.Now()
				rep, err := h.Heal(ctx, now.Add(-*c.healWin), now)
				if err != nil && ctx.Err() == nil {
					d.log.Warn("reconciler: scheduled heal failed", "err", err)
					return
				}
				d.log.Info("reconciler: scheduled heal", "events", rep.Events, "payments", rep.Payments,
					"findings_opened", rep.FindingsOpened, "commands", rep.CommandsEmitted, "unknown", rep.Unknown)
			})
		}()
	} else {
		errc <- nil
	}
	d.log.Info("reconciler: running", "job", s.Job(), "rate", d.limiter.Limit())
	var first error
	for range 4 {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

func every(ctx context.Context, d time.Duration, f func()) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func refresh(ctx context.Context, d *deps, m *reconciler.Metrics, job string) {
	st, err := d.store.Status(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("reconciler: status for metrics", "err", err)
		}
		return
	}
	m.ObserveStatus(st, job)
}

// window parses --since/--until: RFC 3339 times, or durations back from now.
func window(since, until string, now time.Time) (time.Time, time.Time, error) {
	parse := func(name, v string, def time.Time) (time.Time, error) {
		if v == "" {
			if def.IsZero() {
				return def, fmt.Errorf("--%s is required", name)
			}
			return def, nil
		}
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t, nil
		}
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			return now.Add(-d), nil
		}
		return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time or a duration back from now", name, v)
	}
	s, err := parse("since", since, time.Time{})
	if err != nil {
		return s, s, err
	}
	u, err := parse("until", until, now)
	if err != nil {
		return s, u, err
	}
	if !u.After(s) {
		return s, u, fmt.Errorf("--until %s is not after --since %s", u.Format(time.RFC3339), s.Format(time.RFC3339))
	}
	return s, u, nil
}

func findings(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return kit.Usagef("findings: want list, show ID or resolve ID --note …")
	}
	sub, rest := args[0], args[1:]
	c := flags("findings " + sub)
	var all *bool
	var kind, note, by *string
	var limit *int
	switch sub {
	case "list":
		all = c.fs.Bool("all", "", false, "include resolved findings")
		kind = c.fs.String("kind", "", "", "only this kind")
		limit = c.fs.Int("limit", "", 100, "at most this many, newest first")
	case "show":
	case "resolve":
		note = c.fs.String("note", "", "", "what was done about it (required)")
		by = c.fs.String("by", "USER", "operator", "who resolves it")
	default:
		return kit.Usagef("findings: unknown subcommand %q (want list, show or resolve)", sub)
	}
	// Flags may follow the id: "resolve 42 --note …".
	var id int64
	if sub != "list" {
		if len(rest) == 0 {
			return kit.Usagef("findings %s: a finding id is required", sub)
		}
		n, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil || n <= 0 {
			return kit.Usagef("findings %s: %q is not a finding id", sub, rest[0])
		}
		id, rest = n, rest[1:]
	}
	if err := c.fs.Parse(rest); err != nil {
		return err
	}
	if sub == "resolve" && strings.TrimSpace(*note) == "" {
		return kit.Usagef("findings resolve %d: --note saying what was done is required", id)
	}
	d, err := c.open(ctx, "findings")
	if err != nil {
		return err
	}
	defer d.pool.Close()
	switch sub {
	case "list":
		fs, err := d.store.Findings(ctx, reconcilerstore.FindingFilter{All: *all, Kind: reconciler.Kind(*kind), Limit: *limit})
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPAYMENT\tKIND\tVERDICT\tLOCAL\tPROVIDER\tDETECTED\tRESOLUTION")
		for _, f := range fs {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", f.ID, f.PaymentID, f.Kind, f.Verdict, f.LocalStatus,
				dash(f.ExternalStatus), f.DetectedAt.UTC().Format(time.RFC3339), dash(string(f.Resolution)))
		}
		return tw.Flush()
	case "show":
		f, err := d.store.Finding(ctx, id)
		if err != nil {
			return err
		}
		printFinding(out, f)
		return nil
	default:
		if err := d.store.Resolve(ctx, id, *by, *note); err != nil {
			if errors.Is(err, reconciler.ErrFindingNotFound) || errors.Is(err, reconciler.ErrFindingResolved) {
				return kit.UsageError{Err: err}
			}
			return err
		}
		fmt.Fprintf(out, "finding %d resolved\n", id)
		return nil
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printFinding(w io.Writer, f reconciler.Finding) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, dash(v)) }
	row("id", strconv.FormatInt(f.ID, 10))
	row("payment", strconv.FormatInt(f.PaymentID, 10))
	row("order", f.OrderID)
	row("provider payment", f.ProviderID)
	row("kind", string(f.Kind))
	row("verdict", string(f.Verdict))
	row("local status", f.LocalStatus)
	row("provider status", f.ExternalStatus)
	row("repair command", string(f.RepairCommand))
	row("command event", f.CommandEventID)
	row("source", string(f.Source))
	row("detected", f.DetectedAt.UTC().Format(time.RFC3339))
	if f.ResolvedAt != nil {
		row("resolved", f.ResolvedAt.UTC().Format(time.RFC3339))
	}
	row("resolution", string(f.Resolution))
	row("resolved by", f.ResolvedBy)
	row("note", f.Note)
	_ = tw.Flush()
}

func printStatus(w io.Writer, st reconciler.Status) {
	fmt.Fprintf(w, "payments: %d\nreconciliation lag: %s (the longest any payment has gone unverified)\n",
		st.Payments, st.Lag.Round(time.Second))
	for _, c := range st.Cursors {
		fmt.Fprintf(w, "job %s: at id %d, current cycle age %s, cycles completed %d", c.Job, c.LastID,
			st.Now.Sub(c.CycleStartedAt).Round(time.Second), c.CyclesCompleted)
		if c.LastCycleCompletedAt != nil {
			fmt.Fprintf(w, ", last cycle completed %s ago", st.Now.Sub(*c.LastCycleCompletedAt).Round(time.Second))
		}
		if c.LastCycleDuration != nil {
			fmt.Fprintf(w, " (took %s)", c.LastCycleDuration.Round(time.Millisecond))
		}
		fmt.Fprintln(w)
	}
	if len(st.Cursors) == 0 {
		fmt.Fprintln(w, "no cycle has started yet")
	}
	kinds := make([]string, 0, len(st.OpenFindings))
	total := 0
	for k, n := range st.OpenFindings {
		kinds = append(kinds, string(k))
		total += n
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "open findings: %d\n", total)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-40s %d\n", k, st.OpenFindings[reconciler.Kind(k)])
	}
}

func printCounts(w io.Writer, counts map[reconciler.Verdict]int) {
	for _, v := range reconciler.Verdicts {
		fmt.Fprintf(w, "  %-14s %d\n", v, counts[v])
	}
}

func printCycle(w io.Writer, r reconciler.CycleReport) {
	fmt.Fprintf(w, "cycle: %d batches in %s, %d provider calls, %.4f calls per verified row\n",
		r.Batches, r.Duration.Round(time.Millisecond), r.Calls, r.CallsPerVerifiedRow())
	printCounts(w, r.Counts)
	fmt.Fprintf(w, "findings opened: %d, repair commands: %d, findings cleared: %d, rows moved meanwhile: %d, batches lost to a concurrent run: %d\n",
		r.FindingsOpened, r.CommandsEmitted, r.FindingsCleared, r.Moved, r.Concurrent)
}

func printHeal(w io.Writer, r reconciler.HealReport) {
	fmt.Fprintf(w, "heal %s..%s: %d events in %d pages, %d payments (%d unknown locally), %d provider calls\n",
		r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.Events, r.Pages, r.Payments, r.Unknown, r.Calls)
	printCounts(w, r.Counts)
	fmt.Fprintf(w, "findings opened: %d, repair commands: %d\n", r.FindingsOpened, r.CommandsEmitted)
}
