// Command provider-sim runs the Stripe-compatible payment provider
// simulator with its fault knobs. See services/providersim/README.md.
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/providersim"
)

func main() { kit.Main("provider-sim", run) }

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("provider-sim", "provider-sim: a Stripe-compatible payment provider (PaymentIntents, Refunds, Events, signed webhooks) that misbehaves on purpose.")
	addr := fs.String("http-addr", "PROVIDERSIM_ADDR", "127.0.0.1:12111", "listen address (API, /healthz, /readyz, /metrics, /__admin/)")
	fs.Alias("addr", "http-addr")
	apiKey := fs.String("api-key", "PROVIDERSIM_API_KEY", "", "the only secret key accepted; empty accepts any sk_test_… key")
	seed := fs.Int("seed", "PROVIDERSIM_SEED", 1, "seed for every random decision (ids and faults): same seed, same requests, same run")
	dataDir := fs.String("data-dir", "PROVIDERSIM_DATA_DIR", "", "directory for the state snapshot (state.json); empty keeps state in memory only")
	snapEvery := fs.Duration("snapshot-interval", "PROVIDERSIM_SNAPSHOT_INTERVAL", 200*time.Millisecond, "how often changes no answer waits for (scheduled transitions) are written to --data-dir; every answer waits for the state it shows to be written")
	rateLimit := fs.Float("rate-limit", "PROVIDERSIM_RATE_LIMIT", providersim.DefaultRateLimit, "requests per second per API key before 429 rate_limit; 0 disables")
	holdExpiry := fs.Duration("hold-expiry", "PROVIDERSIM_HOLD_EXPIRY", providersim.DefaultHoldExpiry,
		"how long an authorization hold (capture_method=manual) can be captured before the provider cancels it (Stripe: 7 days)")
	idemTTL := fs.Duration("idempotency-ttl", "PROVIDERSIM_IDEMPOTENCY_TTL", 24*time.Hour, "how long an Idempotency-Key is remembered")
	hooks := fs.String("webhook-url", "PROVIDERSIM_WEBHOOK_URLS", "", "comma-separated webhook endpoints that receive the --webhook-events")
	hookEvents := fs.String("webhook-events", "PROVIDERSIM_WEBHOOK_EVENTS", "*",
		"comma-separated event types sent to the webhook endpoints, like a Stripe endpoint's enabled_events (* sends all; the Events API lists all either way)")
	secret := fs.String("webhook-secret", "PROVIDERSIM_WEBHOOK_SECRET", "", "webhook signing secret (whsec_…); required with --webhook-url")
	hookConc := fs.Int("webhook-concurrency", "PROVIDERSIM_WEBHOOK_CONCURRENCY", 1,
		"webhook deliveries in flight at once; 1 sends one at a time in event order, more overlap them and give up order, as Stripe does")
	attempts := fs.Int("webhook-max-attempts", "PROVIDERSIM_WEBHOOK_MAX_ATTEMPTS", 8, "delivery attempts before a webhook is given up")
	backoff := fs.Duration("webhook-backoff", "PROVIDERSIM_WEBHOOK_BACKOFF", time.Second, "wait before the first webhook retry; doubles per attempt")
	maxBackoff := fs.Duration("webhook-max-backoff", "PROVIDERSIM_WEBHOOK_MAX_BACKOFF", 5*time.Minute, "longest wait between webhook retries")
	hookTimeout := fs.Duration("webhook-timeout", "PROVIDERSIM_WEBHOOK_TIMEOUT", 10*time.Second, "timeout of one webhook delivery attempt")
	apiVersion := fs.String("api-version", "PROVIDERSIM_API_VERSION", providersim.DefaultAPIVersion, "api_version stamped on events")
	admin := fs.Bool("admin", "PROVIDERSIM_ADMIN", false, "enable the unauthenticated /__admin/ API (faults, force, stats)")
	grace := fs.Duration("shutdown-grace", "PROVIDERSIM_SHUTDOWN_GRACE", 5*time.Second, "how long in-flight requests may finish on SIGTERM")
	logFlags := kit.AddLogFlags(fs)
	defaults := providersim.DefaultFaults()
	knobs := map[string]*string{}
	for _, k := range providersim.Knobs() {
		env := "PROVIDERSIM_FAULT_" + strings.ToUpper(strings.ReplaceAll(k.Name, "-", "_"))
		knobs[k.Name] = fs.String("fault-"+k.Name, env, k.Get(&defaults), "fault: "+k.Usage)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	faults := defaults
	values := map[string]string{}
	for name, v := range knobs {
		values[name] = *v
	}
	if err := faults.Apply(values); err != nil {
		return kit.Usagef("--fault-%v", err)
	}
	var endpoints []string
	for _, u := range strings.Split(*hooks, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return kit.Usagef("--webhook-url %q: want an http(s) URL", u)
		}
		endpoints = append(endpoints, u)
	}
	var events []string
	for _, e := range strings.Split(*hookEvents, ",") {
		if e = strings.TrimSpace(e); e != "" {
			events = append(events, e)
		}
	}
	if err := providersim.CheckWebhookEvents(events); err != nil {
		return kit.UsageError{Err: err}
	}
	switch {
	case *seed < 0:
		return kit.Usagef("--seed %d: must not be negative", *seed)
	case *rateLimit < 0:
		return kit.Usagef("--rate-limit %v: must not be negative", *rateLimit)
	case len(endpoints) > 0 && *secret == "":
		return kit.Usagef("--webhook-secret is required with --webhook-url")
	case *apiKey != "" && !strings.HasPrefix(*apiKey, "sk_test_"):
		return kit.Usagef("--api-key must start with sk_test_")
	case *hookConc < 1:
		return kit.Usagef("--webhook-concurrency %d: must be at least 1", *hookConc)
	case *attempts < 1:
		return kit.Usagef("--webhook-max-attempts %d: must be at least 1", *attempts)
	case *idemTTL <= 0 || *holdExpiry <= 0 || *backoff <= 0 || *maxBackoff <= 0 || *hookTimeout <= 0 || *snapEvery <= 0:
		return kit.Usagef("--idempotency-ttl, --hold-expiry, --webhook-backoff, --webhook-max-backoff, --webhook-timeout and --snapshot-interval must be positive")
	}
	log, stopTracing, err := logFlags.Start(ctx, os.Stderr, "provider-sim")
	if err != nil {
		return err
	}
	defer stopTracing()
	sim, err := providersim.New(providersim.Config{
		APIKey: *apiKey, Seed: uint64(*seed), Faults: faults, RateLimit: *rateLimit, IdempotencyTTL: *idemTTL, HoldExpiry: *holdExpiry,
		DataDir: *dataDir, SnapshotInterval: *snapEvery, WebhookEndpoints: endpoints, WebhookEvents: events, WebhookSecret: *secret,
		WebhookMaxAttempts: *attempts, WebhookConcurrency: *hookConc, WebhookBackoff: *backoff, WebhookMaxBackoff: *maxBackoff,
		WebhookTimeout: *hookTimeout, APIVersion: *apiVersion, Admin: *admin, Logger: log,
	})
	if err != nil {
		return err
	}
	ops, err := kit.NewOpsServer(*addr)
	if err != nil {
		_ = sim.Close()
		return err
	}
	if err := ops.Registry.Register(sim.Metrics()); err != nil {
		_ = sim.Close()
		return err
	}
	ops.Mux.Handle("/", sim)
	log.Info("provider-sim ready", "addr", ops.Addr(), "seed", *seed, "data_dir", *dataDir, "admin", *admin,
		"webhooks", len(endpoints), "faults", faults.Values())
	stop := context.AfterFunc(ctx, sim.Drain) // hung requests must not hold up shutdown
	defer stop()
	runErr := ops.Run(ctx, log, *grace)
	if err := sim.Close(); err != nil {
		return fmt.Errorf("final snapshot: %w", err)
	}
	return runErr
}
