package chaostest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/services/audit/auditsnapshot"
	"github.com/concordhq/concord/services/internal/grants/grantstest"
	"github.com/concordhq/concord/services/internal/loadgen"
	"github.com/concordhq/concord/services/order/apikey"
	"github.com/concordhq/concord/services/payment/paymentapi"
	"github.com/concordhq/concord/services/payment/paymentprovider"
)

const (
	apiKey = "sk_test_chaos"
	secret = "whsec_chaos"
	// instances of every service: each a member of its consumer groups,
	// each with its relay and sweepers, as users scale out.
	instances = 2
)

// services run as several instances each; the simulators and the
// reconciler run once.
var services = []string{"order-svc", "inventory-svc", "payment-svc", "shipping-svc", "orchestrator"}

// deployment is one chaos run's processes, databases and front doors.
type deployment struct {
	t        *testing.T
	prefix   string
	procs    map[string]*proc.Process // by instance name: "order-svc-0", "provider-sim", …
	urls     map[string]string        // the same, their base URLs (a service's public API where it has one)
	ops      map[string]string        // the services' ops listeners (/readyz, /metrics, /admin/stock), by instance name
	pools    map[string]*pgxpool.Pool // by service
	adm      *kadm.Client
	groups   []string
	orderURL string // round robin over the order-svc instances
	orderKey string // the order API's key, every scope
	simURL   string
	pg       *testkit.PrivatePostgres     // full form only
	kafka    *testkit.PrivateKafkaCluster // full form only: 3 nodes, replication factor 3, min.insync.replicas 2
}

func deploy(t *testing.T, c config) *deployment {
	t.Helper()
	d := &deployment{t: t, prefix: testkit.UniqueName(t, "chaos") + ".", procs: map[string]*proc.Process{}, urls: map[string]string{},
		ops: map[string]string{}, pools: map[string]*pgxpool.Pool{}}
	var k *testkit.Kafka
	admin := ""
	if c.full {
		d.pg, d.kafka = testkit.NewPrivatePostgres(t), testkit.NewPrivateKafkaCluster(t, 3)
		admin, k = d.pg.URL, d.kafka.Kafka()
	} else {
		admin, k = testkit.PostgresURL(t), testkit.NewKafka(t)
	}
	cl, err := kit.NewKafkaClient(t.Context(), k.Config(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	d.adm = kadm.NewClient(cl)
	// Both instances of a service connect as the service's principal (on an
	// authenticated cluster), allowed only its own topics and group.
	kafkaOf := grantstest.Connections(t, d.adm, k.Config(), d.prefix)

	names := []string{"provider-sim", "carrier-sim", "reconciler"}
	for _, s := range services {
		for i := range instances {
			names = append(names, fmt.Sprintf("%s-%d", s, i))
		}
	}
	ports, err := kit.FreePorts(2 * len(names))
	if err != nil {
		t.Fatal(err)
	}
	addr, opsAddr := map[string]string{}, map[string]string{}
	for i, n := range names {
		addr[n], opsAddr[n] = fmt.Sprintf("127.0.0.1:%d", ports[2*i]), fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])
		d.urls[n], d.ops[n] = "http://"+addr[n], "http://"+opsAddr[n]
	}
	// Both order-svc instances accept the one key: written here, before
	// either starts, it is registered by whichever starts first.
	d.orderKey = apikey.New()
	keyFile := filepath.Join(t.TempDir(), "order-api-key")
	if err := os.WriteFile(keyFile, []byte(d.orderKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dbs := map[string]string{}
	for _, s := range services {
		dbs[s] = testkit.NewDatabase(t, admin)
	}
	logs := t.TempDir()
	start := func(name string, env []string, args ...string) *proc.Process {
		bin := strings.TrimRight(strings.TrimRight(name, "0123456789"), "-")
		p := proc.Start(t, proc.Command{Name: name, Path: filepath.Join(binDir, bin), Env: env, Args: args, Log: filepath.Join(logs, name+".log")})
		d.procs[name] = p
		return p
	}
	ready := func(name, url string) {
		if err := d.procs[name].WaitReady(t.Context(), url, 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	// payment-svc's webhooks go through a front door that spreads them
	// over its instances, as a load balancer would.
	payments := newBalancer(instanceURLs(d.urls, "payment-svc"))
	webhooks := httptest.NewServer(payments)
	t.Cleanup(webhooks.Close)
	start("provider-sim", nil, "--http-addr", addr["provider-sim"], "--api-key", apiKey, "--admin", "--rate-limit", "0",
		"--seed", fmt.Sprint(c.seed), "--data-dir", t.TempDir(), "--webhook-url", webhooks.URL+"/webhooks/stripe",
		"--webhook-events", strings.Join(paymentapi.Events, ","), "--webhook-secret", secret,
		"--webhook-backoff", "200ms", "--webhook-max-backoff", "2s", "--fault-5xx-rate", "0.02", "--fault-webhook-duplicate-rate", "0.05")
	start("carrier-sim", nil, "--http-addr", addr["carrier-sim"], "--admin", "--seed", fmt.Sprint(c.seed), "--fault-decline-rate", "0.02")
	ready("provider-sim", d.urls["provider-sim"]+"/healthz")
	ready("carrier-sim", d.urls["carrier-sim"]+"/healthz")
	d.simURL = d.urls["provider-sim"]

	own := map[string][]string{
		"order-svc":     {"CONCORD_API_KEY_FILE=" + keyFile},
		"inventory-svc": nil,
		"payment-svc": {"CONCORD_PROVIDER_URL=" + d.simURL, "CONCORD_PROVIDER_API_KEY=" + apiKey, "CONCORD_WEBHOOK_SECRET=" + secret,
			"CONCORD_PROVIDER_TIMEOUT=2s", "CONCORD_CHARGE_LEASE=5s", "CONCORD_RECHECK_PENDING_AFTER=5s"},
		"shipping-svc": {"CONCORD_CARRIER_URL=" + d.urls["carrier-sim"], "CONCORD_CARRIER_TIMEOUT=2s", "CONCORD_CARRIER_LEASE=5s"},
		"orchestrator": nil,
	}
	for _, s := range services {
		d.groups = append(d.groups, d.prefix+s)
		for i := range instances {
			name := fmt.Sprintf("%s-%d", s, i)
			env := append([]string{"CONCORD_DATABASE_URL=" + dbs[s], "CONCORD_TOPIC_PREFIX=" + d.prefix, "CONCORD_GROUP=" + d.prefix + s,
				// A restarted member takes its partitions back at once
				// under its instance id; one paused for less than the
				// session timeout keeps them.
				"CONCORD_GROUP_INSTANCE_ID=" + name, "CONCORD_GROUP_SESSION_TIMEOUT=10s",
				"CONCORD_HTTP_ADDR=" + addr[name],
				"CONCORD_OPS_ADDR=" + opsAddr[name], "CONCORD_TOPIC_PARTITIONS=6", "CONCORD_SHUTDOWN_GRACE=5s", "CONCORD_LOG_FORMAT=json"}, own[s]...)
			env = append(env, kafkaOf(s).Env()...)
			start(name, env)
			// The first instance migrates the database and creates the
			// topics before the second starts.
			ready(name, d.ops[name]+"/readyz")
		}
		d.pools[s] = testkit.Pool(t, dbs[s])
	}
	// A payment-svc instance killed mid-charge leaves its intent without
	// the provider's id until the charge's lease runs out and another
	// attempt reads it (5 s here, plus the restart): the reconciler leaves
	// payments that recent alone rather than call them drift.
	start("reconciler", append([]string{"CONCORD_DATABASE_URL=" + dbs["payment-svc"], "CONCORD_PROVIDER_URL=" + d.simURL,
		"CONCORD_PROVIDER_API_KEY=" + apiKey, "CONCORD_TOPIC_PREFIX=" + d.prefix, "CONCORD_HTTP_ADDR=" + addr["reconciler"],
		"CONCORD_INTERVAL=2s", "CONCORD_BACKOFF=2s", "CONCORD_GRACE=30s",
		"CONCORD_HEAL_EVERY=0", "CONCORD_LOG_FORMAT=json"}, k.Env()...), "run")
	ready("reconciler", d.urls["reconciler"]+"/readyz")

	orders := httptest.NewServer(newBalancer(instanceURLs(d.urls, "order-svc")))
	t.Cleanup(orders.Close)
	d.orderURL = orders.URL
	// Every process drains on SIGTERM at the end, all at once.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, p := range d.procs {
			wg.Go(func() { _ = p.Stop(syscall.SIGTERM, 10*time.Second) })
		}
		wg.Wait()
	})
	return d
}

func instanceURLs(urls map[string]string, service string) []string {
	var out []string
	for i := range instances {
		out = append(out, urls[fmt.Sprintf("%s-%d", service, i)])
	}
	return out
}

// victims are the processes the faults pick from: every instance of every
// service, provider-sim (its state survives in --data-dir) and the
// reconciler. carrier-sim keeps its shipments in memory only, so killing
// it would lose the outside world's state rather than test Concord's.
func (d *deployment) victims() []string {
	var out []string
	for name := range d.procs {
		if name != "carrier-sim" {
			out = append(out, name)
		}
	}
	return out
}

func (d *deployment) sources() auditsnapshot.Sources {
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: apiKey, BaseURL: d.simURL})
	if err != nil {
		d.t.Fatal(err)
	}
	return auditsnapshot.Sources{Orders: d.pools["order-svc"], Inventory: d.pools["inventory-svc"], Payments: d.pools["payment-svc"],
		Orchestrator: d.pools["orchestrator"], Shipping: d.pools["shipping-svc"], Provider: gw}
}

// stock puts units of SKU 1…skus in stock (ample: the run is about
// faults, not scarcity) and returns what it stocked, for the audit.
func (d *deployment) stock(skus, units int) map[string]int64 {
	d.t.Helper()
	stocked := map[string]int64{}
	var items []map[string]any
	for i := 1; i <= skus; i++ {
		stocked[loadgen.SKU(i)] = int64(units)
		items = append(items, map[string]any{"sku": loadgen.SKU(i), "quantity": units})
	}
	body, _ := json.Marshal(map[string]any{"items": items})
	resp, err := http.Post(d.ops["inventory-svc-0"]+"/admin/stock", "application/json", bytes.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		d.t.Fatalf("stock: %s: %s", resp.Status, b)
	}
	return stocked
}

// timedOut counts the orders cancelled because they took too long:
// order-svc's stuck-order timeout, and orchestrated sagas a step of which
// never answered.
func (d *deployment) timedOut(ctx context.Context) int {
	var orders, sagas int
	_ = d.pools["order-svc"].QueryRow(ctx, `select count(*) from orders where reason = 'timeout'`).Scan(&orders)
	_ = d.pools["orchestrator"].QueryRow(ctx, `select count(*) from saga_executions
		where status in ('COMPENSATED', 'FAILED') and error like '%no reply%'`).Scan(&sagas)
	return orders + sagas
}

// outcomes are the orders by status and reason, one line each.
func (d *deployment) outcomes(ctx context.Context) []string {
	rows, err := d.pools["order-svc"].Query(ctx, `select status || coalesce(' (' || reason || ')', '') || ' ' || flow, count(*)
		from orders group by 1 order by 1`)
	if err != nil {
		return []string{err.Error()}
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var what string
		var n int
		if err := rows.Scan(&what, &n); err != nil {
			return []string{err.Error()}
		}
		out = append(out, fmt.Sprintf("%-44s %6d", what, n))
	}
	return out
}

// balancer is a front door spreading requests round robin over backends.
// A backend that cannot be reached is skipped (the request never left);
// one that does not answer in time is not tried again here, since it may
// have acted: the client retries under its own idempotency key.
type balancer struct {
	backends []string
	next     atomic.Uint64
	client   *http.Client
}

func newBalancer(backends []string) *balancer {
	return &balancer{backends: backends, client: &http.Client{Timeout: 3 * time.Second}}
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	first := b.next.Add(1)
	for i := range uint64(len(b.backends)) {
		target := b.backends[(first+i)%uint64(len(b.backends))]
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := b.client.Do(req)
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			continue
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusGatewayTimeout)
			return
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(w, "no instance could be reached", http.StatusBadGateway)
}

// explain prints what the orchestrator, payment-svc and shipping-svc hold
// about a saga, for a failed run's report: the tables are gone once the
// test ends.
func (d *deployment) explain(ctx context.Context, sagaID string) {
	fmt.Printf("    saga %s:\n", sagaID)
	for _, q := range []struct {
		service, sql string
	}{
		{"orchestrator", `select status || ' failed_step=' || coalesce(failed_step, '-') || ' error=' || coalesce(error, '-')
			from saga_executions where saga_id = $1`},
		{"orchestrator", `select step_name || '=' || step_status || ' attempts=' || attempts || '/' || compensation_attempts ||
			' uncertain=' || uncertain || ' error=' || coalesce(step_error, '-') from saga_steps where execution_id = $1 order by step_order`},
		{"payment-svc", `select hold_key || ' ' || status || ' pi=' || coalesce(provider_payment_id, '-') || ' reason=' || coalesce(failure_reason, '-')
			|| ' observed=' || coalesce(observed_external_status, '-') from payment_holds where saga_id = $1`},
		{"payment-svc", `select command_type || ' ' || idempotency_key || ' ' || status || ' ' || coalesce(outcome, '-') || ' reason=' ||
			coalesce(reason, '-') || ' attempts=' || attempts || ' last_error=' || coalesce(last_error, '-')
			from hold_commands where saga_id = $1 order by created_at`},
		{"shipping-svc", `select status || ' cancel=' || coalesce(cancel_status, '-') || ' calls=' || create_calls
			from shipments where saga_id = $1`},
	} {
		rows, err := d.pools[q.service].Query(ctx, q.sql, sagaID)
		if err != nil {
			fmt.Printf("      %s: %v\n", q.service, err)
			continue
		}
		for rows.Next() {
			var line string
			if rows.Scan(&line) == nil {
				fmt.Printf("      %-13s %s\n", q.service, line)
			}
		}
		rows.Close()
	}
}

// leaderNode is the cluster node that leads partition 0 of the order
// events (every service's records pass through one such leader), or the
// first node when metadata cannot tell.
func (d *deployment) leaderNode(ctx context.Context) *testkit.PrivateKafka {
	topic := d.prefix + "order-events"
	md, err := d.adm.Metadata(ctx, topic)
	if err == nil {
		if p, ok := md.Topics[topic].Partitions[0]; ok {
			for _, k := range d.kafka.Nodes {
				if k.ID() == p.Leader {
					return k
				}
			}
		}
	}
	return d.kafka.Nodes[0]
}
