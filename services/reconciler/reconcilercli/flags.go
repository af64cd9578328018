package reconcilercli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
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

func flags(cmd string, out io.Writer) *common {
	c := &common{fs: kit.NewFlagSet("reconciler "+cmd, "reconciler "+cmd+": compare payments with the provider, record findings, emit repair commands.")}
	fs := c.fs
	fs.SetOutput(out)
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
		c.addr = fs.String("http-addr", "RECONCILER_ADDR", ":9095", "listen address of /metrics, /healthz and /readyz")
		fs.Alias("addr", "http-addr")
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
	stop    func() // flushes the traces
}

// close releases what open built.
func (d *deps) close() {
	d.pool.Close()
	d.stop()
}

func (c *common) open(ctx context.Context, cmd string) (_ *deps, err error) {
	if err := kit.Require("database-url", *c.dbURL); err != nil {
		return nil, kit.UsageError{Err: err}
	}
	log, stop, err := c.log.Start(ctx, os.Stderr, "reconciler")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	d := &deps{log: log, stop: stop}
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
