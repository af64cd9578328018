package orchtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

var binDir string

func TestMain(m *testing.M) {
	proc.MainWithBinaries(m, &binDir, "../../cmd/orchestrator", "../../cmd/order-svc", "../../cmd/inventory-svc")
}

// opts configure a deployment's orchestrators.
type opts struct {
	instances            int
	timeout              time.Duration // --step-timeout (default 20s: no timeouts unless a test wants them)
	attempts             int           // --step-attempts (default 2)
	compensationAttempts int           // --compensation-attempts (default 3)
	webhookStatus        int           // the alert webhook's answer (0: no webhook)
	// services runs order-svc and inventory-svc for real (the fakes
	// stand in for payment and shipping only).
	services bool
}

// deployment is one orchestrator database and topic prefix, its
// orchestrator processes and the fake participants.
type deployment struct {
	t        *testing.T
	prefix   string
	dbURL    string
	pool     *pgxpool.Pool
	fakes    *participants
	producer *kgo.Client
	writer   outbox.Writer
	procs    []*proc.Process
	addrs    []string
	alerts   *alertSink
	kafka    *testkit.Kafka
	// services are the real services' URLs (order-svc's public API,
	// inventory-svc's ops listener, which serves /admin/stock) and
	// servicePools their databases (order-svc, inventory-svc), when
	// opts.services; orderKey is the order API's key.
	services     map[string]string
	orderKey     string
	servicePools []*pgxpool.Pool
}

func outboxEvent(p contract.Payload) outbox.Event { return outbox.Event{Payload: p} }

// alertSink is the alert webhook: it records what it is sent.
type alertSink struct {
	mu     sync.Mutex
	bodies []string
	status int
}

func (a *alertSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bodies = append(a.bodies, string(b))
	w.WriteHeader(a.status)
}

func (a *alertSink) received() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.bodies...)
}

func newDeployment(t *testing.T, o opts) *deployment {
	t.Helper()
	if o.instances == 0 {
		o.instances = 1
	}
	if o.timeout == 0 {
		o.timeout = 20 * time.Second
	}
	if o.attempts == 0 {
		o.attempts = 2
	}
	if o.compensationAttempts == 0 {
		o.compensationAttempts = 3
	}
	k := testkit.NewKafka(t)
	d := &deployment{t: t, prefix: testkit.UniqueName(t, "orch") + ".", dbURL: testkit.NewDatabase(t, testkit.PostgresURL(t))}
	d.writer = outbox.Writer{TopicPrefix: d.prefix}
	d.kafka = k
	var topics []string
	for _, typ := range []contract.Type{contract.TypeSagaCheckoutRequested, contract.TypeSagaStepReplied, contract.TypeSagaFinished,
		contract.TypePaymentAuthorizeHold, contract.TypeInventoryReserveStock, contract.TypeShippingCreateShipment} {
		topics = append(topics, d.prefix+typ.Topic())
	}
	adm := kadm.NewClient(k.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := publisher.CreateTopics(ctx, adm, 3, -1, topics...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, append(topics, d.prefix+"orchestrator.dlq")...)
	})
	d.producer = k.Client(t)
	if o.services {
		d.fakes = newParticipants(t, k, d.prefix, "payment", "shipping")
	} else {
		d.fakes = newParticipants(t, k, d.prefix)
	}
	var webhook string
	if o.webhookStatus != 0 {
		d.alerts = &alertSink{status: o.webhookStatus}
		ts := httptest.NewServer(d.alerts)
		t.Cleanup(ts.Close)
		webhook = ts.URL
	}
	ports, err := kit.FreePorts(o.instances + 3)
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	if o.services {
		d.services = map[string]string{}
		for i, name := range []string{"order-svc", "inventory-svc"} {
			db, dbEnv := testkit.NewDatabase(t, testkit.PostgresURL(t)), "ORDERS_DATABASE_URL="
			if name == "inventory-svc" {
				dbEnv = "INVENTORY_DATABASE_URL="
			}
			ops := fmt.Sprintf("127.0.0.1:%d", ports[o.instances+i])
			env := []string{dbEnv + db, "CONCORD_TOPIC_PREFIX=" + d.prefix, "CONSUMER_GROUP=" + d.prefix + name,
				"KAFKA_BROKERS=" + strings.Join(k.Brokers, ","), "CONCORD_OPS_ADDR=" + ops, "TOPIC_PARTITIONS=3", "SHUTDOWN_GRACE=5s",
				"GROUP_SESSION_TIMEOUT=6s"}
			d.services[name] = "http://" + ops
			keyFile := filepath.Join(t.TempDir(), "order-api-key")
			if name == "order-svc" {
				api := fmt.Sprintf("127.0.0.1:%d", ports[o.instances+2])
				env = append(env, "CONCORD_HTTP_ADDR="+api, "CONCORD_API_KEY_FILE="+keyFile)
				d.services[name] = "http://" + api
			}
			p := proc.Start(t, proc.Command{Name: name, Path: filepath.Join(binDir, name), Log: filepath.Join(logs, name+".log"), Env: env})
			if err := p.WaitReady(context.Background(), "http://"+ops+"/readyz", 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if name == "order-svc" {
				key, err := os.ReadFile(keyFile)
				if err != nil {
					t.Fatal(err)
				}
				d.orderKey = strings.TrimSpace(string(key))
			}
			d.servicePools = append(d.servicePools, testkit.Pool(t, db))
			t.Cleanup(func() { _ = p.Stop(syscall.SIGTERM, 10*time.Second) })
		}
	}
	ports = ports[:o.instances]
	for i, port := range ports {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		env := []string{"ORCHESTRATOR_DATABASE_URL=" + d.dbURL, "CONCORD_TOPIC_PREFIX=" + d.prefix, "CONSUMER_GROUP=" + d.prefix + "orchestrator",
			"KAFKA_BROKERS=" + strings.Join(k.Brokers, ","), "CONCORD_OPS_ADDR=" + addr, "TOPIC_PARTITIONS=3", "SHUTDOWN_GRACE=5s",
			// A member killed with -9 never leaves its group; its
			// partitions move after the session timeout (6s is the
			// broker's minimum).
			"GROUP_SESSION_TIMEOUT=6s",
			"SAGA_STEP_TIMEOUT=" + o.timeout.String(), "SAGA_STEP_ATTEMPTS=" + strconv.Itoa(o.attempts),
			"SAGA_COMPENSATION_ATTEMPTS=" + strconv.Itoa(o.compensationAttempts),
			"SAGA_RETRY_BACKOFF_MIN=50ms", "SAGA_RETRY_BACKOFF_MAX=400ms", "SAGA_SWEEP_INTERVAL=100ms",
			"SAGA_STUCK_AFTER=2s", "SAGA_STUCK_CHECK_INTERVAL=500ms", "SAGA_ALERT_WEBHOOK_URL=" + webhook}
		p := proc.Start(t, proc.Command{Name: fmt.Sprintf("orchestrator-%d", i), Path: filepath.Join(binDir, "orchestrator"), Env: env,
			Log: filepath.Join(logs, fmt.Sprintf("orchestrator-%d.log", i))})
		d.procs = append(d.procs, p)
		d.addrs = append(d.addrs, "http://"+addr)
	}
	for i := range d.procs {
		d.waitReady(i)
	}
	d.pool = testkit.Pool(t, d.dbURL)
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, p := range d.procs {
			wg.Go(func() { _ = p.Stop(syscall.SIGTERM, 10*time.Second) })
		}
		wg.Wait()
	})
	return d
}

func (d *deployment) waitReady(i int) {
	d.t.Helper()
	if err := d.procs[i].WaitReady(context.Background(), d.addrs[i]+"/readyz", 60*time.Second); err != nil {
		d.t.Fatal(err)
	}
}

// kill9 kills instance i without letting it drain; restart starts it
// again on the same database, group and port.
func (d *deployment) kill9(i int) { d.procs[i].Kill() }

func (d *deployment) restart(i int) {
	d.t.Helper()
	if err := d.procs[i].Restart(); err != nil {
		d.t.Fatal(err)
	}
	d.waitReady(i)
}

// checkout asks the orchestrator for a checkout saga scripted by pl and
// returns its id (the order id).
func (d *deployment) checkout(pl plan) string {
	d.t.Helper()
	id := schemas.NewEventID()
	d.fakes.script(id, pl)
	d.produce(contract.SagaCheckoutRequestedV1{SagaID: id, OrderID: id, CustomerID: "cust-1", Currency: "USD", TotalAmount: 2500,
		Items:           []contract.SagaCheckoutRequestedV1Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: 2500}},
		ShippingAddress: &contract.SagaCheckoutRequestedV1ShippingAddress{Line1: "1 Main St", City: "Springfield", PostalCode: "12345", Country: "US"}})
	return id
}

// produce appends p to its topic as an outbox would.
func (d *deployment) produce(p contract.Payload) string {
	d.t.Helper()
	_, rec, err := d.writer.Prepare(outbox.Event{Payload: p})
	if err != nil {
		d.t.Fatal(err)
	}
	d.produceRaw(rec.Topic, rec.PartitionKey, rec.Payload)
	return rec.EventID
}

func (d *deployment) produceRaw(topic, key string, value []byte) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.producer.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: value}).FirstErr(); err != nil {
		d.t.Fatal(err)
	}
}

// status is a saga's status ("" when it does not exist).
func (d *deployment) status(id string) string {
	var s string
	_ = d.pool.QueryRow(context.Background(), `select status from saga_executions where saga_id = $1`, id).Scan(&s)
	return s
}

// waitTerminal waits for every saga to end and returns their statuses.
func (d *deployment) waitTerminal(timeout time.Duration, ids ...string) map[string]string {
	d.t.Helper()
	out := map[string]string{}
	testkit.Eventually(d.t, timeout, "sagas terminal", func() error {
		for _, id := range ids {
			s := d.status(id)
			if s != "COMPLETED" && s != "COMPENSATED" && s != "FAILED" {
				return fmt.Errorf("saga %s is %q; %d of %d terminal", id, s, len(out), len(ids))
			}
			out[id] = s
		}
		return nil
	})
	return out
}

// steps is a saga's steps as "name=status".
func (d *deployment) steps(id string) []string {
	d.t.Helper()
	return testkit.Strings(d.t, d.pool, `select step_name || '=' || step_status from saga_steps s where s.saga_id = $1 order by step_order`, id)
}

// metric sums the samples of name whose labels contain every label given
// (as `k="v"`), over every live instance.
func (d *deployment) metric(name string, labels ...string) float64 {
	d.t.Helper()
	var sum float64
	for i, base := range d.addrs {
		if !d.procs[i].Running() {
			continue
		}
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			d.t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
				continue
			}
			match := true
			for _, l := range labels {
				match = match && strings.Contains(line, l)
			}
			if !match {
				continue
			}
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
		resp.Body.Close()
	}
	return sum
}

// keys is what a saga sent, as a sorted "key×sends" list of distinct
// commands per idempotency key.
func (d *deployment) sent(id string) map[string]int {
	out := map[string]int{}
	for k := range d.fakes.keysOf(id) {
		out[strings.TrimPrefix(k, id+":")] = d.fakes.sends(k)
	}
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
