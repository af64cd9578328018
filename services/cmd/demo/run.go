package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/audit/auditsnapshot"
	"github.com/concordhq/concord/services/internal/grants"
	"github.com/concordhq/concord/services/internal/loadgen"
	"github.com/concordhq/concord/services/order/apikey"
	"github.com/concordhq/concord/services/order/orderstore"
	"github.com/concordhq/concord/services/payment/paymentapi"
	"github.com/concordhq/concord/services/payment/paymentprovider"
)

const (
	apiKey        = "sk_test_concord_demo"
	webhookSecret = "whsec_concord_demo"
)

type running struct {
	procs []*proc.Process
	// orderURL and payURL are public APIs (orders, webhooks); invURL,
	// shipURL and orchURL the ops listeners of services without one.
	orderURL, invURL, payURL, sim string
	shipURL, carrier, orchURL     string
	// ops are the services' ops listeners (/metrics, /readyz), by name.
	ops map[string]string
	// orderKey is the order API's key the demo made (every scope).
	orderKey string
	recURL   string // empty when no reconciler runs (--bench)
	// ports and opsPorts are each binary's listeners; kafkaOf is each
	// service's Kafka connection under its own principal.
	ports, opsPorts map[string]int
	kafkaOf         func(service string) kit.KafkaConfig
	pools           map[string]*pgxpool.Pool
	adm             *kadm.Client
	groups          []string
	revoke          func() // deletes the services' principals (nil: none made)
}

func (r *running) stop() {
	// Services first (they drain and commit), the provider last.
	for i := len(r.procs) - 1; i >= 0; i-- {
		_ = r.procs[i].Stop(syscall.SIGTERM, 25*time.Second)
	}
	for _, p := range r.pools {
		p.Close()
	}
	if r.revoke != nil {
		r.revoke()
	}
	if r.adm != nil {
		r.adm.Close()
	}
}

func demo(ctx context.Context, c config) error {
	step := func(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }
	var names []string
	for _, n := range []string{"order-svc", "inventory-svc", "payment-svc", "shipping-svc", "orchestrator", "funding-svc"} {
		names = append(names, dbName(c.dbURLs[n]))
	}
	step("fresh databases %s; topics prefixed %q", strings.Join(names, ", "), c.prefix)
	if err := recreateDatabases(ctx, c); err != nil {
		return err
	}
	if err := deleteOldDemoTopics(ctx, c); err != nil {
		fmt.Printf("    (could not delete earlier demo topics: %v)\n", err)
	}

	r, err := startAll(ctx, c)
	if r != nil {
		defer r.stop()
	}
	if err != nil {
		return err
	}
	step("provider-sim %s (faults: %s)", r.sim, orNone(c.faults))
	step("carrier-sim %s (faults: %s)", r.carrier, orNone(c.carrierFaults))
	step("order API %s  payment webhooks %s  (logs in %s)", r.orderURL, r.payURL, c.logDir)
	step("ops listeners: order-svc %s  inventory-svc %s  payment-svc %s  orchestrator %s  shipping-svc %s",
		r.ops["order-svc"], r.invURL, r.ops["payment-svc"], r.orchURL, r.shipURL)
	if r.recURL != "" {
		step("reconciler %s (a full cycle every %s)", r.recURL, c.reconcileEvery)
	}

	initial, err := seedStock(ctx, r.invURL, c)
	if err != nil {
		return err
	}
	step("stocked %d SKUs with %d units each", c.skus, c.stock)

	var usage []*measured
	var load *dbLoad
	var from time.Time
	if c.bench {
		if from, err = warmUp(ctx, r, c, step); err != nil {
			return err
		}
		usage = startUsage(r, c)
		if load, err = startDBLoad(ctx, c); err != nil {
			fmt.Printf("    (this run's PostgreSQL backends not measured: %v)\n", err)
		}
	}
	step("placing %d orders at %.0f/s (%.0f%% with a declining card, %.0f%% orchestrated)", c.orders, c.rate, c.declineShare*100, c.orchestratedShare*100)
	res, err := loadgen.Run(ctx, loadgen.Config{OrderURL: r.orderURL, APIKey: r.orderKey, Orders: c.orders, Rate: c.rate, Concurrency: c.concurrency,
		SKUs: c.skus, DeclineShare: c.declineShare, OrchestratedShare: c.orchestratedShare, Seed: uint64(c.seed)})
	if err != nil {
		return err
	}
	step("%d orders accepted in %s (%d refused)", len(res.Created), res.Duration.Round(time.Millisecond), res.Failed)

	step("waiting until every order is terminal and the saga is quiet")
	waitStart := time.Now()
	if err := waitQuiet(ctx, r, c.bound+30*time.Second); err != nil {
		fmt.Printf("    %v\n", err)
	}
	step("quiet after %s", time.Since(waitStart).Round(time.Millisecond))
	if kit.TracingConfigured() {
		if order, traceID, err := sampleTrace(ctx, r); err != nil {
			fmt.Printf("    (no sample trace: %v)\n", err)
		} else {
			step("order %s is trace %s in your OTLP backend (every service exported to it)", order, traceID)
		}
	}

	var rl *rail
	if c.rail {
		if rl, err = startRail(ctx, r, c); err != nil {
			return err
		}
		if err := rl.run(ctx, step); err != nil {
			return fmt.Errorf("broker rail: %w", err)
		}
		step("broker rail done in %s", time.Since(rl.started).Round(time.Millisecond))
	}

	if c.bench {
		err := benchReport(ctx, r, res, c, usage, load, from)
		if c.keepRunning {
			fmt.Println("\nservices keep running; Ctrl-C stops them")
			<-ctx.Done()
		}
		return err
	}
	ok, err := summary(ctx, r, c, initial, res, rl)
	if err != nil {
		return err
	}
	fmt.Printf(`
Where to look next (the services stop when the demo ends; add --keep-running to explore them)
  order API      curl -s -H 'Authorization: Bearer %[10]s' '%[1]s/orders?status=CANCELLED' | jq .orders[0]
                 curl -s -H 'Authorization: Bearer %[10]s' %[1]s/orders/<id> | jq .history
                 (more keys: %[9]s/order-svc keys create --name NAME --scope orders:read --database-url '%[5]s')
  stock          curl -s %[2]s/stock | jq '.stock[:3]'          (inventory-svc's ops listener)
  metrics        curl -s %[3]s/metrics | grep concord_        (payment-svc's ops listener)
  provider       curl -s %[4]s/__admin/stats | jq
  reconciler     %[9]s/reconciler findings list --all --database-url '%[6]s'
  console        make console   (a web UI over this run's data: order timelines, outbox, dead letters, findings)
  databases      psql '%[5]s' -c 'select status, reason, count(*) from orders group by 1, 2'
                 psql '%[6]s' -c 'select status, count(*), sum(amount) from payments group by 1'
                 psql '%[7]s' -c 'select * from stock order by sku limit 5'
  logs           %[8]s/*.log
`, r.orderURL, r.invURL, r.ops["payment-svc"], r.sim, c.dbURLs["order-svc"], c.dbURLs["payment-svc"], c.dbURLs["inventory-svc"], c.logDir, c.binDir,
		r.orderKey)
	if rl != nil {
		rl.hints()
	}
	if c.keepRunning {
		fmt.Println("\nservices keep running; Ctrl-C stops them")
		<-ctx.Done()
	}
	if !ok {
		return errFailed
	}
	fmt.Println("\nRESULT: PASS")
	return nil
}

// sampleTrace is the first order placed and the trace its POST
// /orders started, read from the traceparent order-svc stored on the
// order's order.created outbox row.
func sampleTrace(ctx context.Context, r *running) (order, traceID string, err error) {
	var headers map[string]string
	err = r.pools["order-svc"].QueryRow(ctx, `select aggregate_id, headers from outbox
		where event_type = 'order.created' and headers ? 'traceparent' order by id limit 1`).Scan(&order, &headers)
	if err != nil {
		return "", "", fmt.Errorf("order-svc's outbox: %w", err)
	}
	return order, outbox.SpanContext(headers).TraceID().String(), nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func recreateDatabases(ctx context.Context, c config) error {
	conn, err := pgx.Connect(ctx, c.adminURL)
	if err != nil {
		return fmt.Errorf("connect %s: %w", c.adminURL, err)
	}
	defer conn.Close(ctx)
	for _, u := range c.dbURLs {
		name := pgx.Identifier{dbName(u)}.Sanitize()
		if _, err := conn.Exec(ctx, "drop database if exists "+name+" with (force)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		if _, err := conn.Exec(ctx, "create database "+name); err != nil {
			return fmt.Errorf("create database %s: %w", name, err)
		}
	}
	return nil
}

// deleteOldDemoTopics removes the topics of earlier demo runs, so the
// broker does not accumulate them: those under --prefix when it is given,
// else every demo- and bench- topic.
func deleteOldDemoTopics(ctx context.Context, c config) error {
	cl, err := kit.NewKafkaClient(ctx, c.kafka, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	var old []string
	for _, t := range topics.Names() {
		if c.ownPrefix && strings.HasPrefix(t, c.prefix) || !c.ownPrefix && (strings.HasPrefix(t, "demo-") || strings.HasPrefix(t, "bench-")) {
			old = append(old, t)
		}
	}
	if len(old) > 0 {
		_, err = adm.DeleteTopics(ctx, old...)
	}
	return err
}

func startAll(ctx context.Context, c config) (*running, error) {
	r := &running{pools: map[string]*pgxpool.Pool{}, ops: map[string]string{}}
	// Every binary's listener, and an ops listener of each service.
	free, err := kit.FreePorts(2 * len(binaries))
	if err != nil {
		return r, fmt.Errorf("find free ports: %w", err)
	}
	ports, opsPorts := map[string]int{}, map[string]int{}
	r.ports, r.opsPorts = ports, opsPorts
	for i, n := range binaries {
		ports[n], opsPorts[n] = free[2*i], free[2*i+1]
		r.ops[n] = fmt.Sprintf("http://127.0.0.1:%d", opsPorts[n])
	}
	url := func(n string) string { return fmt.Sprintf("http://127.0.0.1:%d", ports[n]) }
	r.sim, r.carrier, r.orderURL, r.invURL, r.payURL = url("provider-sim"), url("carrier-sim"), url("order-svc"), r.ops["inventory-svc"], url("payment-svc")
	r.shipURL, r.orchURL = r.ops["shipping-svc"], r.ops["orchestrator"]

	sims := []struct {
		name string
		args []string
	}{
		{"provider-sim", append([]string{"--http-addr", fmt.Sprintf("127.0.0.1:%d", ports["provider-sim"]), "--api-key", apiKey, "--admin",
			"--rate-limit", "0", "--seed", fmt.Sprint(c.seed), "--webhook-url", r.payURL + "/webhooks/stripe",
			"--webhook-events", strings.Join(paymentapi.Events, ","), "--webhook-concurrency", "16",
			"--webhook-secret", webhookSecret, "--webhook-backoff", "500ms", "--webhook-max-backoff", "5s"}, faultArgs(c.faults)...)},
		{"carrier-sim", append([]string{"--http-addr", fmt.Sprintf("127.0.0.1:%d", ports["carrier-sim"]), "--admin",
			"--seed", fmt.Sprint(c.seed)}, faultArgs(c.carrierFaults)...)},
	}
	for _, sm := range sims {
		p, err := start(c.binDir, c.logDir, sm.name, nil, sm.args...)
		if err != nil {
			return r, err
		}
		r.procs = append(r.procs, p)
		if err := p.WaitReady(ctx, url(sm.name)+"/healthz", 20*time.Second); err != nil {
			return r, err
		}
	}

	cl, err := kit.NewKafkaClient(ctx, c.kafka, nil)
	if err != nil {
		return r, err
	}
	r.adm = kadm.NewClient(cl)
	if r.kafkaOf, err = principals(ctx, r, c); err != nil {
		return r, err
	}
	specs := []struct {
		name string
		env  []string
	}{
		{"order-svc", []string{"CONCORD_DATABASE_URL=" + c.dbURLs["order-svc"], "CONCORD_STUCK_AFTER=" + c.stuckAfter.String()}},
		{"inventory-svc", []string{"CONCORD_DATABASE_URL=" + c.dbURLs["inventory-svc"]}},
		{"payment-svc", []string{"CONCORD_DATABASE_URL=" + c.dbURLs["payment-svc"], "CONCORD_PROVIDER_URL=" + r.sim,
			"CONCORD_PROVIDER_API_KEY=" + apiKey, "CONCORD_WEBHOOK_SECRET=" + webhookSecret, "CONCORD_RECHECK_PENDING_AFTER=" + c.recheck.String()}},
		// A carrier answer that does not come within 2s counts as lost:
		// the shipment is looked up by its key before any new booking.
		{"shipping-svc", []string{"CONCORD_DATABASE_URL=" + c.dbURLs["shipping-svc"], "CONCORD_CARRIER_URL=" + r.carrier,
			"CONCORD_CARRIER_TIMEOUT=2s", "CONCORD_CARRIER_LEASE=5s"}},
		{"orchestrator", []string{"CONCORD_DATABASE_URL=" + c.dbURLs["orchestrator"], "CONCORD_STUCK_AFTER=" + c.stuckAfter.String()}},
	}
	started := map[string]*proc.Process{}
	for _, s := range specs {
		p, err := start(c.binDir, c.logDir, s.name, append(r.serviceEnv(c, s.name), s.env...))
		if err != nil {
			return r, err
		}
		r.procs = append(r.procs, p)
		started[s.name] = p
	}
	for _, s := range specs {
		r.groups = append(r.groups, c.prefix+s.name)
		if err := started[s.name].WaitReady(ctx, r.ops[s.name]+"/readyz", 60*time.Second); err != nil {
			return r, err
		}
		pool, err := pgxpool.New(ctx, c.dbURLs[s.name])
		if err != nil {
			return r, err
		}
		r.pools[s.name] = pool
	}
	// The demo's key, made through the store as `order-svc keys create`
	// makes one: loadgen presents it, and the hints print it.
	if r.orderKey, _, err = (&orderstore.Store{Pool: r.pools["order-svc"]}).CreateKey(ctx, "demo", apikey.Scopes, ""); err != nil {
		return r, err
	}
	if c.bench {
		return r, nil
	}
	return r, startReconciler(ctx, r, c, ports["reconciler"])
}

// serviceEnv is what every service of the run is started with: the
// run's topic prefix, its own consumer group, listeners and Kafka
// principal, JSON logs.
func (r *running) serviceEnv(c config, name string) []string {
	return append([]string{"CONCORD_TOPIC_PREFIX=" + c.prefix, "CONCORD_GROUP=" + c.prefix + name,
		"CONCORD_HTTP_ADDR=" + fmt.Sprintf("127.0.0.1:%d", r.ports[name]),
		"CONCORD_OPS_ADDR=" + fmt.Sprintf("127.0.0.1:%d", r.opsPorts[name]), "CONCORD_LOG_FORMAT=json"}, r.kafkaOf(name).Env()...)
}

// principals gives each service its own Kafka principal on an
// authenticated cluster, allowed only its own topics and consumer group
// (services/internal/grants), deleted when the demo stops.
func principals(ctx context.Context, r *running, c config) (func(service string) kit.KafkaConfig, error) {
	of, revoke, err := grants.Connections(ctx, r.adm, c.kafka, c.prefix)
	if err != nil || c.kafka.SASLMechanism == "" {
		return of, err
	}
	fmt.Printf("==> each service connects to Kafka as its own principal (%s<service>, SCRAM-SHA-512), allowed only its own topics and group\n", c.prefix)
	r.revoke = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := revoke(ctx); err != nil {
			fmt.Printf("    (could not delete the services' Kafka principals: %v)\n", err)
		}
	}
	return of, nil
}

// faultArgs are a simulator's --fault-<name> flags from "name=value,…".
func faultArgs(faults string) []string {
	var args []string
	for _, kv := range strings.Split(faults, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok {
			args = append(args, "--fault-"+k, v)
		}
	}
	return args
}

func seedStock(ctx context.Context, invURL string, c config) (map[string]int64, error) {
	initial := map[string]int64{}
	var items []map[string]any
	for i := 1; i <= c.skus; i++ {
		initial[loadgen.SKU(i)] = int64(c.stock)
		items = append(items, map[string]any{"sku": loadgen.SKU(i), "quantity": c.stock})
	}
	body, _ := json.Marshal(map[string]any{"items": items})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, invURL+"/admin/stock", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("seed stock: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("seed stock: %s: %s", resp.Status, b)
	}
	return initial, nil
}

// waitQuiet polls until no order or saga is in flight, no reservation is
// held, no payment is pending or awaiting its refund, every outbox is
// published and every group has consumed it.
func waitQuiet(ctx context.Context, r *running, timeout time.Duration) error {
	var progress func(auditsnapshot.Work)
	if os.Getenv("CONCORD_DEMO_VERBOSE") != "" || os.Getenv("DEMO_VERBOSE") != "" {
		progress = func(w auditsnapshot.Work) { fmt.Println("    " + w.String()) }
	}
	// Consumer lag counts: an event published but not yet applied (say
	// the inventory releasing stock for an order.cancelled) is work left.
	return auditsnapshot.WaitQuiet(ctx, r.sources(nil), r.adm, r.groups, timeout, progress)
}

// sources are the run's databases and provider, for the audit.
func (r *running) sources(provider *paymentprovider.Client) auditsnapshot.Sources {
	return auditsnapshot.Sources{Orders: r.pools["order-svc"], Inventory: r.pools["inventory-svc"], Payments: r.pools["payment-svc"],
		Orchestrator: r.pools["orchestrator"], Shipping: r.pools["shipping-svc"], Provider: provider}
}
