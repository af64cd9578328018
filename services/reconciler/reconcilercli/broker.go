package reconcilercli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/time/rate"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerbroker"
	"github.com/concordhq/concord/services/reconciler/reconcilerfunding"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

// broker is `reconciler broker heal|once|run`: the broker rail, funding-svc's
// database against the broker, through the same verdicts, findings and
// repair commands as payments.
func broker(ctx context.Context, args []string, out io.Writer) error {
	fs := kit.NewFlagSet("reconciler broker", `reconciler broker: compare funding-svc's mirror of the broker's journals and
transfers with the broker, record every drift once, and emit repair commands
(funding.apply_broker_status) that funding-svc applies through its canonical writer.`)
	fs.SetOutput(out)
	sub := func(name string) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error { return brokerCommand(ctx, name, args, out) }
	}
	return fs.Dispatch(ctx, args, []kit.Command{
		{Name: "heal", Summary: "re-pull the broker's activities, journals and transfers of --since..--until and repair what was missed", Run: sub("heal")},
		{Name: "once", Summary: "one full cycle of the cursor scan over the funding movements, print its summary and exit", Run: sub("once")},
		{Name: "run", Summary: "scan in a loop, heal on a schedule, serve /metrics", Run: sub("run")},
		{Name: "findings", Summary: "the broker rail's open findings, newest first (--all includes resolved ones)",
			Run: func(ctx context.Context, args []string) error { return brokerFindings(ctx, "findings", args, out) }},
		{Name: "resolve", Summary: `resolve ID --note "what was done": close a broker rail finding`,
			Run: func(ctx context.Context, args []string) error { return brokerFindings(ctx, "resolve", args, out) }},
	})
}

// brokerFindings is `reconciler broker findings` and `reconciler broker
// resolve ID --note …`: the review workflow over the funding database's
// findings.
func brokerFindings(ctx context.Context, cmd string, args []string, out io.Writer) error {
	fs := kit.NewFlagSet("reconciler broker "+cmd, "reconciler broker "+cmd+": review the drift recorded between funding-svc's mirror and the broker.")
	fs.SetOutput(out)
	dbURL := fs.String("funding-database-url", "", "", "funding-svc's database, where the broker rail's findings are")
	var all *bool
	var limit *int
	var note, by *string
	if cmd == "findings" {
		all = fs.Bool("all", "", false, "include resolved findings")
		limit = fs.Int("limit", "", 100, "at most this many, newest first")
	} else {
		fs.SetUsage("reconciler broker resolve ID --note NOTE [flags]")
		note = fs.String("note", "", "", "what was done about it (required)")
		by = fs.String("by", "", cmp.Or(os.Getenv("USER"), "operator"), "who resolves it (default: $USER, else operator)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var id int64
	switch rest := fs.Args(); {
	case cmd == "findings" && len(rest) > 0:
		return kit.Usagef("broker findings: unexpected argument %q", rest[0])
	case cmd == "resolve":
		if len(rest) != 1 {
			return kit.Usagef("broker resolve: exactly one finding id is required")
		}
		n, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil || n <= 0 {
			return kit.Usagef("broker resolve: %q is not a finding id", rest[0])
		}
		if id = n; strings.TrimSpace(*note) == "" {
			return kit.Usagef("broker resolve %d: --note saying what was done is required", id)
		}
	}
	if err := kit.Require("funding-database-url", *dbURL); err != nil {
		return kit.UsageError{Err: err}
	}
	pool, err := kit.NewPool(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := reconcilerfunding.Migrate(ctx, pool); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if cmd == "resolve" {
		// The findings table has the payments database's shape, so the
		// payments store's resolution (and its checks) serve it as well.
		if err := reconcilerstore.New(pool).Resolve(ctx, id, *by, *note); err != nil {
			if errors.Is(err, reconciler.ErrFindingNotFound) || errors.Is(err, reconciler.ErrFindingResolved) {
				return kit.UsageError{Err: err}
			}
			return err
		}
		fmt.Fprintf(out, "finding %d resolved\n", id)
		return nil
	}
	found, err := reconcilerfunding.New(pool).Findings(ctx, *all, *limit)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDOMAIN\tBROKER ID\tACCOUNT\tKIND\tVERDICT\tLOCAL\tBROKER\tDETECTED\tRESOLUTION")
	for _, f := range found {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.ID, f.Domain, dash(f.BrokerID), f.AccountID, f.Kind, f.Verdict,
			f.LocalStatus, dash(f.ExternalStatus), f.DetectedAt.UTC().Format(time.RFC3339), dash(string(f.Resolution)))
	}
	return tw.Flush()
}

// brokerFlags are the flags of the broker subcommands.
type brokerFlags struct {
	fs                       *kit.FlagSet
	dbURL, url, key, secret  *string
	firm, job, prefix        *string
	since, until, addr       *string
	window, grace, timeout   *time.Duration
	idle, backoff            *time.Duration
	healEach, healWin        *time.Duration
	workers, batch, attempts *int
	limit, share             *float64
	log                      kit.LogFlags
}

func newBrokerFlags(cmd string, out io.Writer) *brokerFlags {
	c := &brokerFlags{fs: kit.NewFlagSet("reconciler broker "+cmd,
		"reconciler broker "+cmd+": compare funding movements with the broker, record findings, emit repair commands.")}
	fs := c.fs
	fs.SetOutput(out)
	c.log = kit.AddLogFlags(fs)
	c.dbURL = fs.String("funding-database-url", "", "", "funding-svc's database: the movements, and the reconciler's cursor, findings and repair commands (its outbox)")
	c.url = fs.String("broker-url", "", "", "broker API base URL (broker-sim: http://127.0.0.1:12112)")
	c.key = fs.String("broker-key-id", "", "", "broker API key id (HTTP Basic user)")
	c.secret = fs.String("broker-secret", "", "", "broker API secret (HTTP Basic password)")
	c.firm = fs.String("firm-account", "", "", "the firm's broker account, the other side of every journal (funding-svc's --firm-account)")
	c.window = fs.Duration("executed-window", "", reconciler.DefaultExecutedWindow,
		"how long a movement that looks final (completed, cancelled, reversed) is still compared with the broker after its last change: executed is not final")
	c.grace = fs.Duration("grace", "", time.Minute, "movements changed more recently (and broker records created more recently) are in flight and not judged")
	c.workers = fs.Int("workers", "", reconciler.DefaultConcurrency, "broker calls in flight")
	c.limit = fs.Float("broker-rate-limit", "", 1000, "the broker's rate limit, requests per minute for the whole correspondent (broker-sim's default)")
	c.share = fs.Float("rate-share", "", 0.5, "share of --broker-rate-limit the reconciler uses (the rest is left to funding-svc)")
	c.attempts = fs.Int("rate-limit-attempts", "", 5, "tries of one call answered 429, each after the X-RateLimit-Reset the answer names")
	c.timeout = fs.Duration("broker-timeout", "", 10*time.Second, "bound of one broker call (the activities replay is bounded by the window instead)")
	c.prefix = fs.String("topic-prefix", "CONCORD_TOPIC_PREFIX", "", "prefix of the funding-commands topic (match funding-svc's --topic-prefix)")
	switch cmd {
	case "heal":
		c.since = fs.String("since", "", "", "window start (inclusive), RFC 3339 or a duration back from now (e.g. 72h)")
		c.until = fs.String("until", "", "", "window end (exclusive), RFC 3339 or a duration back from now (default: now)")
	default:
		c.job = fs.String("job", "", reconciler.DefaultBrokerJob, "cursor name; replicas on one job share the work")
		c.batch = fs.Int("batch", "", reconciler.DefaultBatch, "movements per keyset page")
	}
	if cmd == "run" {
		c.idle = fs.Duration("interval", "", time.Minute, "pause between cycles")
		c.backoff = fs.Duration("backoff", "", 30*time.Second, "pause after a broker outage or an error")
		c.addr = fs.String("http-addr", "", ":9096", "listen address of /metrics, /healthz and /readyz")
		c.healEach = fs.Duration("heal-every", "", time.Hour, "how often the scheduled heal runs (0: never)")
		c.healWin = fs.Duration("heal-window", "", reconciler.DefaultHealWindow, "how far back the scheduled heal re-reads; longer than the longest expected outage")
	}
	return c
}

func brokerCommand(ctx context.Context, cmd string, args []string, out io.Writer) error {
	c := newBrokerFlags(cmd, out)
	if err := c.fs.Parse(args); err != nil {
		return err
	}
	if c.fs.NArg() > 0 {
		return kit.Usagef("broker %s: unexpected argument %q", cmd, c.fs.Arg(0))
	}
	var since, until time.Time
	if cmd == "heal" {
		var err error
		if since, until, err = window(*c.since, *c.until, time.Now()); err != nil {
			return kit.UsageError{Err: err}
		}
	}
	if err := kit.Require("funding-database-url", *c.dbURL, "broker-url", *c.url, "firm-account", *c.firm); err != nil {
		return kit.UsageError{Err: err}
	}
	switch {
	case *c.limit <= 0 || *c.share <= 0 || *c.share > 1:
		return kit.Usagef("--broker-rate-limit must be > 0 and --rate-share in (0, 1]")
	case *c.workers <= 0:
		return kit.Usagef("--workers must be > 0")
	case *c.window <= 0 || *c.grace < 0:
		return kit.Usagef("--executed-window must be > 0 and --grace not negative")
	}
	log, stop, err := c.log.Start(ctx, os.Stderr, "reconciler")
	if err != nil {
		return err
	}
	defer stop()
	pool, err := kit.NewPool(ctx, *c.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	// The reconciler's tables reference the movements and its commands go
	// to the outbox; all three migrations are idempotent.
	for _, m := range []func(context.Context, *pgxpool.Pool) error{outbox.Migrate, fundingstore.Migrate, reconcilerfunding.Migrate} {
		if err := m(ctx, pool); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	var ops *kit.OpsServer
	var m *reconciler.Metrics
	if cmd == "run" {
		if ops, err = kit.NewOpsServer(*c.addr, func(ctx context.Context) error { return pool.Ping(ctx) }); err != nil {
			return err
		}
		m = reconciler.NewMetrics(ops.Registry)
	}
	rec, err := c.reconciler(pool, m, log)
	if err != nil {
		return err
	}
	switch cmd {
	case "heal":
		rep, err := rec.Heal(ctx, since, until)
		printBrokerHeal(out, rep)
		return err
	case "once":
		rep, err := rec.RunCycle(ctx)
		printBrokerCycle(out, rep)
		return err
	}
	return c.serve(ctx, rec, reconcilerfunding.New(pool), ops, m, log)
}

func (c *brokerFlags) reconciler(pool *pgxpool.Pool, m *reconciler.Metrics, log *slog.Logger) (*reconciler.BrokerReconciler, error) {
	client := func(timeout time.Duration) *fundingbroker.Client {
		return &fundingbroker.Client{BaseURL: *c.url, KeyID: *c.key, Secret: *c.secret, HTTP: &http.Client{Timeout: timeout}}
	}
	perSecond := *c.limit * *c.share / 60
	reader := &reconcilerbroker.Reader{Client: client(*c.timeout), Streams: client(0), Firm: *c.firm,
		// Burst of the workers: they start together, then keep the pace.
		Limiter: rate.NewLimiter(rate.Limit(perSecond), *c.workers), Attempts: *c.attempts, Observe: m.ObserveCall}
	store := reconcilerfunding.New(pool)
	store.Outbox = outbox.Writer{TopicPrefix: *c.prefix}
	cfg := reconciler.BrokerConfig{Store: store, Broker: reader, Grace: *c.grace, ExecutedWindow: *c.window,
		Workers: *c.workers, Metrics: m, Logger: log}
	if c.job != nil {
		cfg.Job, cfg.Batch = *c.job, *c.batch
	}
	return reconciler.NewBrokerReconciler(cfg)
}

// serve is `reconciler broker run`: the scan loop, the scheduled heal and
// the metrics refresher until SIGTERM, with /metrics.
func (c *brokerFlags) serve(ctx context.Context, rec *reconciler.BrokerReconciler, store *reconcilerfunding.Store, ops *kit.OpsServer,
	m *reconciler.Metrics, log *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 4)
	go func() { errc <- ops.Run(ctx, log, 5*time.Second) }()
	go func() { errc <- rec.Run(ctx, *c.idle, *c.backoff) }()
	status := func(ctx context.Context) (reconciler.Status, error) { return store.Status(ctx, rec.Job()) }
	go func() { errc <- every(ctx, 15*time.Second, func() { refresh(ctx, log, m, rec.Job(), status) }) }()
	if *c.healEach > 0 {
		go func() {
			errc <- every(ctx, *c.healEach, func() {
				now := time.Now()
				rep, err := rec.Heal(ctx, now.Add(-*c.healWin), now)
				if err != nil && ctx.Err() == nil {
					log.Warn("reconciler: scheduled broker heal failed", "err", err)
					return
				}
				log.Info("reconciler: scheduled broker heal", "records", rep.Records, "unknown", rep.Unknown,
					"findings_opened", rep.FindingsOpened, "commands", rep.CommandsEmitted, "calls", rep.Calls)
			})
		}()
	} else {
		errc <- nil
	}
	log.Info("reconciler: broker rail running", "job", rec.Job())
	var first error
	for range 4 {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

func printBrokerHeal(w io.Writer, r reconciler.BrokerHealReport) {
	fmt.Fprintf(w, "broker heal %s..%s: %d activities, %d journals, %d transfers, %d wallet transfers; %d records (%d unknown locally), %d broker calls (%d answered 429)\n",
		r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.Activities, r.Journals, r.Transfers,
		r.WalletTransfers, r.Records, r.Unknown, r.Calls, r.RateLimited)
	printCounts(w, r.Counts)
	fmt.Fprintf(w, "findings opened: %d, repair commands: %d\n", r.FindingsOpened, r.CommandsEmitted)
}

func printBrokerCycle(w io.Writer, r reconciler.BrokerCycleReport) {
	fmt.Fprintf(w, "broker cycle: %d batches in %s, %d broker calls, %d settled movements not asked about\n",
		r.Batches, r.Duration.Round(time.Millisecond), r.Calls, r.Settled)
	printCounts(w, r.Counts)
	fmt.Fprintf(w, "findings opened: %d, repair commands: %d, findings cleared: %d, movements moved meanwhile: %d\n",
		r.FindingsOpened, r.CommandsEmitted, r.FindingsCleared, r.Moved)
}
