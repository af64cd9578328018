// Command demo runs Concord's checkout end to end on the real local stack,
// both saga styles side by side: fresh databases and topics, provider-sim
// and carrier-sim with moderate faults, order-svc, inventory-svc and
// payment-svc (each with its in-process outbox relay), the orchestrator and
// shipping-svc for the orchestrated orders, the reconciler, a burst of
// orders over scarce stock; then the broker rail (broker-sim and
// funding-svc with stream faults, a kill -9, corrections, returns and
// wallet transfers, healed by the reconciler: rail.go); then a summary
// with the invariants of both flows, the reconciler's drift and the rail
// checked. It exits 0 only when every check passes.
//
// With --bench it runs the same pipeline without faults, declines, stock
// pressure or reconciler at a fixed offered rate and prints throughput and
// order-to-terminal latency.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/concordhq/concord/infra/kit"
)

func main() { kit.Main("demo", run) }

type config struct {
	binDir, logDir             string
	adminURL                   string
	dbURLs                     map[string]string // service → database URL
	kafka                      kit.KafkaConfig
	orders, skus, stock        int
	rate                       float64
	concurrency                int
	declineShare               float64
	orchestratedShare          float64
	faults                     string
	carrierFaults              string
	bound, stuckAfter, recheck time.Duration
	reconcileEvery             time.Duration
	reconcileGrace             time.Duration
	bench                      bool
	keepRunning                bool
	seed                       int
	prefix                     string
	ownPrefix                  bool // --prefix given: delete only its own topics
	// The broker rail: off with --rail=false (and in --bench).
	rail           bool
	railAccounts   int
	brokerFaults   string
	brokerDropRate float64
}

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("demo", "Concord demo: run the order/inventory/payment saga on the local stack and check its invariants.")
	kf := kit.AddKafkaFlags(fs)
	exe, _ := os.Executable()
	var c config
	fs.StringVar(&c.binDir, "bin-dir", filepath.Dir(exe), "directory holding provider-sim, carrier-sim, the services, reconciler and orchestrator")
	logDir := fs.String("log-dir", "DEMO_LOG_DIR", ".local/demo", "where the processes' logs go")
	admin := fs.String("postgres-url", "CONCORD_POSTGRES_URL", "", "admin URL of the PostgreSQL server (databases are dropped and recreated)")
	ordersDB := fs.String("orders-database-url", "ORDERS_DATABASE_URL", "", "order-svc database (recreated)")
	invDB := fs.String("inventory-database-url", "INVENTORY_DATABASE_URL", "", "inventory-svc database (recreated)")
	payDB := fs.String("payments-database-url", "PAYMENTS_DATABASE_URL", "", "payment-svc database (recreated)")
	orchDB := fs.String("orchestrator-database-url", "ORCHESTRATOR_DATABASE_URL", "",
		"orchestrator database (recreated; default: the database \"orchestrator\" on the orders database's server)")
	shipDB := fs.String("shipping-database-url", "SHIPPING_DATABASE_URL", "",
		"shipping-svc database (recreated; default: the database \"shipping\" on the orders database's server)")
	fundDB := fs.String("funding-database-url", "FUNDING_DATABASE_URL", "",
		"funding-svc database (recreated; default: the database \"funding\" on the orders database's server)")
	fs.IntVar(&c.orders, "orders", 500, "orders to place")
	fs.IntVar(&c.skus, "skus", 50, "SKUs to spread them over")
	fs.IntVar(&c.stock, "stock-per-sku", 14, "units of each SKU in stock (scarce: some orders run out)")
	fs.Float64Var(&c.rate, "rate", 100, "orders per second offered")
	fs.IntVar(&c.concurrency, "concurrency", 32, "order requests in flight")
	fs.Float64Var(&c.declineShare, "decline-share", 0.08, "share of orders paid with a card the provider declines")
	fs.Float64Var(&c.orchestratedShare, "orchestrated-share", 0.3,
		"share of orders placed with \"flow\": \"orchestrated\" (the orchestrator drives them through payment-svc's holds, inventory-svc and shipping-svc); the rest take the choreographed flow")
	// A fifth of the payments stay processing for 2s and settle only by
	// webhook; a tenth of the webhooks are dropped, so some payments stay
	// pending until the reconciler finds them.
	fs.StringVar(&c.faults, "faults", "5xx-rate=0.05,webhook-drop-rate=0.1,webhook-duplicate-rate=0.1,webhook-reorder-rate=0.05,processing-rate=0.2,processing-delay=2s",
		"provider-sim fault knobs, name=value comma-separated")
	// Some shipments are declined (their sagas compensate), some carrier
	// answers fail or never come (shipping-svc retries, or looks the key
	// up before booking again).
	fs.StringVar(&c.carrierFaults, "carrier-faults", "decline-rate=0.05,5xx-rate=0.05,hang-rate=0.02",
		"carrier-sim fault knobs, name=value comma-separated")
	fs.DurationVar(&c.bound, "terminal-bound", 90*time.Second, "every order must be terminal within this long of its creation")
	fs.DurationVar(&c.stuckAfter, "stuck-after", 45*time.Second, "order-svc cancels orders not terminal after this long")
	fs.DurationVar(&c.recheck, "recheck-pending-after", 0,
		"payment-svc reads a processing payment from the provider after this long without a webhook (0: off, the reconciler heals dropped webhooks)")
	fs.DurationVar(&c.reconcileEvery, "reconcile-every", 2*time.Second, "pause between the reconciler's full cycles")
	fs.DurationVar(&c.reconcileGrace, "reconcile-grace", 5*time.Second,
		"the reconciler leaves payments changed more recently alone (longer than a webhook normally takes)")
	fs.BoolVar(&c.rail, "rail", true, "also run the broker rail: broker-sim and funding-svc with stream faults, a kill -9, corrections, returns and wallet transfers, healed and checked against the broker")
	fs.IntVar(&c.railAccounts, "rail-accounts", 6, "customer accounts the broker rail moves money for")
	fs.StringVar(&c.brokerFaults, "broker-faults", "sse-disconnect-rate=0.05,sse-duplicate-rate=0.05,sse-reorder-rate=0.05",
		"broker-sim fault knobs for the whole rail, name=value comma-separated")
	fs.Float64Var(&c.brokerDropRate, "broker-drop-rate", 0.2,
		"share of stream messages broker-sim drops in the rail's second half (recovered by the reconciler's heal)")
	fs.BoolVar(&c.bench, "bench", false, "benchmark: no faults, no declines, ample stock; print throughput and latency")
	fs.BoolVar(&c.keepRunning, "keep-running", false, "leave the services running after the summary until Ctrl-C")
	fs.IntVar(&c.seed, "seed", 1, "seed of the order mix and the provider's faults")
	prefix := fs.String("prefix", "DEMO_TOPIC_PREFIX", "",
		"topic and consumer-group prefix of this run; empty: demo-<time>. and the topics of earlier demo-/bench- runs are deleted first. Set it when others share the broker: then only topics under it are deleted")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if err := kit.Require("postgres-url", *admin, "orders-database-url", *ordersDB, "inventory-database-url", *invDB,
		"payments-database-url", *payDB); err != nil {
		return kit.UsageError{Err: fmt.Errorf("%w (run it through `make demo`, which starts the stack and sets them)", err)}
	}
	c.adminURL, c.kafka = *admin, kf.Config()
	for _, db := range []struct {
		url  *string
		name string
	}{{orchDB, "orchestrator"}, {shipDB, "shipping"}, {fundDB, "funding"}} {
		if *db.url != "" {
			continue
		}
		u, err := url.Parse(*ordersDB)
		if err != nil {
			return kit.Usagef("--orders-database-url: %v", err)
		}
		u.Path = "/" + db.name
		*db.url = u.String()
	}
	if c.rail && c.railAccounts < 2 {
		return kit.Usagef("--rail-accounts %d: the rail needs at least 2 accounts", c.railAccounts)
	}
	if c.orchestratedShare < 0 || c.orchestratedShare > 1 {
		return kit.Usagef("--orchestrated-share %v: want a share between 0 and 1", c.orchestratedShare)
	}
	c.dbURLs = map[string]string{"order-svc": *ordersDB, "inventory-svc": *invDB, "payment-svc": *payDB, "orchestrator": *orchDB,
		"shipping-svc": *shipDB, "funding-svc": *fundDB}
	c.logDir, _ = filepath.Abs(*logDir)
	c.prefix, c.ownPrefix = *prefix, *prefix != ""
	if !c.ownPrefix {
		c.prefix = fmt.Sprintf("demo-%s.", time.Now().UTC().Format("20060102-150405"))
	}
	if c.bench {
		c.faults, c.carrierFaults, c.declineShare = "", "", 0
		c.stock = 1_000_000
		c.rail = false
	}
	for _, name := range binaries {
		if _, err := os.Stat(filepath.Join(c.binDir, name)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make build` first", name, c.binDir)
		}
	}
	if err := os.MkdirAll(c.logDir, 0o755); err != nil {
		return err
	}
	return demo(ctx, c)
}

func dbName(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(p.Path, "/")
}

var errFailed = errors.New("invariant checks FAILED")

// binaries are the processes a demo starts, in the order it starts them.
var binaries = []string{"provider-sim", "carrier-sim", "order-svc", "inventory-svc", "payment-svc", "shipping-svc", "orchestrator", "reconciler",
	"broker-sim", "funding-svc"}
