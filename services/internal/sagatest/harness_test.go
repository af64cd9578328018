package sagatest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/internal/grants/grantstest"
	"github.com/concordhq/concord/services/payment/paymentapi"
	"github.com/concordhq/concord/services/providersim"
	"github.com/concordhq/concord/services/shipping/carriersim"
)

const (
	apiKey = "sk_test_sagatest"
	secret = "whsec_sagatest"
)

var binDir string

func TestMain(m *testing.M) {
	proc.MainWithBinaries(m, &binDir, "../../cmd/order-svc", "../../cmd/inventory-svc", "../../cmd/payment-svc",
		"../../cmd/shipping-svc", "../../cmd/orchestrator")
}

// saga is one running deployment: provider-sim in-process, three services
// as processes, each with a fresh database, all on a fresh topic prefix.
// An orchestrated deployment adds carrier-sim in-process, shipping-svc and
// the orchestrator.
type saga struct {
	t      *testing.T
	sim    *providersim.Server
	simURL string
	// orderURL and payURL are the public APIs (orders, webhooks);
	// invURL is inventory-svc's ops listener, which serves /admin/stock
	// (it has no public one).
	orderURL, invURL, payURL string
	// ops are every service's ops listener (/metrics, /readyz).
	ops map[string]string
	// apiKey is the order API's key, with every scope.
	apiKey                     string
	orders, inventory, payment *pgxpool.Pool
	carrier                    *carriersim.Server
	shipping, orchestrator     *pgxpool.Pool // nil unless orchestrated
	procs                      map[string]*proc.Process
	env                        map[string][]string
	logs                       string
	stocked                    *stocked
	// writer and kafka produce events straight to the deployment's
	// topics, as a service's relay would (see produce).
	writer outbox.Writer
	kafka  *testkit.Kafka
}

type opts struct {
	faults     providersim.Faults
	stuckAfter time.Duration // order-svc's timeout (default 60s)
	recheck    time.Duration // payment-svc's recheck of processing payments (default 0: webhooks only)
	// orchestrated runs shipping-svc (against carrier-sim with
	// carrierFaults) and the orchestrator beside the three services.
	orchestrated  bool
	carrierFaults carriersim.Faults
	// clock and holdExpiry are provider-sim's (default: the system clock,
	// Stripe's 7 days).
	clock      providersim.Clock
	holdExpiry time.Duration
	// unknownOrderWait is payment-svc's --unknown-order-wait (default
	// its own, 2m).
	unknownOrderWait time.Duration
	// otlp, when set, is the OTLP/HTTP endpoint the services export their
	// spans to.
	otlp string
}

func newSaga(t *testing.T, o opts) *saga {
	t.Helper()
	if o.stuckAfter == 0 {
		o.stuckAfter = 60 * time.Second
	}
	admin := testkit.PostgresURL(t)
	k := testkit.NewKafka(t)
	prefix := testkit.UniqueName(t, "saga") + "."
	s := &saga{t: t, procs: map[string]*proc.Process{}, env: map[string][]string{}, logs: t.TempDir(),
		stocked: &stocked{units: map[string]int64{}}, writer: outbox.Writer{TopicPrefix: prefix}, kafka: k}
	services := []string{"order-svc", "inventory-svc", "payment-svc"}
	if o.orchestrated {
		services = append(services, "shipping-svc", "orchestrator")
	}
	free, err := kit.FreePorts(2 * len(services))
	if err != nil {
		t.Fatal(err)
	}
	ports, opsPorts := map[string]int{}, map[string]int{}
	s.ops = map[string]string{}
	for i, name := range services {
		ports[name], opsPorts[name] = free[2*i], free[2*i+1]
		s.ops[name] = fmt.Sprintf("http://127.0.0.1:%d", opsPorts[name])
	}
	url := func(n string) string { return fmt.Sprintf("http://127.0.0.1:%d", ports[n]) }
	s.orderURL, s.invURL, s.payURL = url("order-svc"), s.ops["inventory-svc"], url("payment-svc")
	keyFile := filepath.Join(t.TempDir(), "order-api-key")

	sim, err := providersim.New(providersim.Config{APIKey: apiKey, Faults: o.faults, WebhookEndpoints: []string{s.payURL + "/webhooks/stripe"},
		WebhookEvents: paymentapi.Events,
		WebhookSecret: secret, WebhookBackoff: 200 * time.Millisecond, WebhookMaxBackoff: time.Second, Admin: true,
		Clock: o.clock, HoldExpiry: o.holdExpiry})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(func() { ts.Close(); sim.Close() })
	s.sim, s.simURL = sim, ts.URL

	dbs := map[string]string{}
	for _, name := range services {
		dbs[name] = testkit.NewDatabase(t, admin)
	}
	extras := map[string][]string{
		"order-svc": {"CONCORD_DATABASE_URL=" + dbs["order-svc"], "CONCORD_STUCK_AFTER=" + o.stuckAfter.String(), "CONCORD_SWEEP_INTERVAL=200ms",
			"CONCORD_API_KEY_FILE=" + keyFile},
		"inventory-svc": {"CONCORD_DATABASE_URL=" + dbs["inventory-svc"]},
		"payment-svc": {"CONCORD_DATABASE_URL=" + dbs["payment-svc"], "CONCORD_PROVIDER_URL=" + ts.URL, "CONCORD_PROVIDER_API_KEY=" + apiKey,
			"CONCORD_WEBHOOK_SECRET=" + secret, "CONCORD_RECHECK_PENDING_AFTER=" + o.recheck.String(), "CONCORD_PROVIDER_TIMEOUT=2s", "CONCORD_CHARGE_LEASE=3s"},
	}
	if o.unknownOrderWait != 0 {
		extras["payment-svc"] = append(extras["payment-svc"], "CONCORD_UNKNOWN_ORDER_WAIT="+o.unknownOrderWait.String())
	}
	if o.orchestrated {
		s.carrier, err = carriersim.New(carriersim.Config{Faults: o.carrierFaults, Admin: true})
		if err != nil {
			t.Fatal(err)
		}
		cs := httptest.NewServer(s.carrier)
		t.Cleanup(func() { s.carrier.Drain(); cs.Close() })
		// A carrier answer later than 5s counts as lost: the key is
		// looked up before any new booking.
		extras["shipping-svc"] = []string{"CONCORD_DATABASE_URL=" + dbs["shipping-svc"], "CONCORD_CARRIER_URL=" + cs.URL,
			"CONCORD_CARRIER_TIMEOUT=5s", "CONCORD_CARRIER_LEASE=10s"}
		extras["orchestrator"] = []string{"CONCORD_DATABASE_URL=" + dbs["orchestrator"], "CONCORD_SWEEP_INTERVAL=100ms"}
	}
	// Each service connects as its own principal, allowed only its own
	// topics and group: the saga runs under the ACLs it is deployed with.
	kafkaOf := grantstest.Connections(t, k.Admin(t), k.Config(), prefix)
	for name, extra := range extras {
		s.env[name] = append(append([]string{"CONCORD_TOPIC_PREFIX=" + prefix, "CONCORD_GROUP=" + prefix + name,
			fmt.Sprintf("CONCORD_HTTP_ADDR=127.0.0.1:%d", ports[name]),
			fmt.Sprintf("CONCORD_OPS_ADDR=127.0.0.1:%d", opsPorts[name]),
			// A member killed with -9 never leaves its group; the group
			// gives its partitions away after the session timeout, which
			// is 45s unless told otherwise (6s is the broker's minimum).
			"CONCORD_TOPIC_PARTITIONS=3", "CONCORD_SHUTDOWN_GRACE=5s", "CONCORD_GROUP_SESSION_TIMEOUT=6s"}, kafkaOf(name).Env()...), extra...)
	}
	if o.otlp != "" {
		for name := range s.env {
			// Spans leave every 100ms rather than every 5s.
			s.env[name] = append(s.env[name], "OTEL_EXPORTER_OTLP_ENDPOINT="+o.otlp, "OTEL_BSP_SCHEDULE_DELAY=100")
		}
	}
	for _, name := range services {
		s.start(name)
	}
	for _, name := range services {
		s.waitReady(name)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatalf("order-svc --api-key-file: %v", err)
	}
	s.apiKey = strings.TrimSpace(string(key))
	s.orders, s.inventory, s.payment = testkit.Pool(t, dbs["order-svc"]), testkit.Pool(t, dbs["inventory-svc"]), testkit.Pool(t, dbs["payment-svc"])
	if o.orchestrated {
		s.shipping, s.orchestrator = testkit.Pool(t, dbs["shipping-svc"]), testkit.Pool(t, dbs["orchestrator"])
	}
	// The services drain on SIGTERM, all at once; each process's own
	// cleanup (proc.Start) then logs its tail if the test failed.
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, p := range s.procs {
			wg.Go(func() { _ = p.Stop(syscall.SIGTERM, 10*time.Second) })
		}
		wg.Wait()
	})
	return s
}

// on returns the deployment with its helpers reporting to t, for a
// subtest that shares a deployment with others.
func (s *saga) on(t *testing.T) *saga {
	c := *s
	c.t = t
	return &c
}

// start starts a service, or restarts it after kill9; its log continues.
func (s *saga) start(name string) {
	s.t.Helper()
	if p := s.procs[name]; p != nil {
		if err := p.Restart(); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	s.procs[name] = proc.Start(s.t, proc.Command{Name: name, Path: filepath.Join(binDir, name), Env: s.env[name],
		Log: filepath.Join(s.logs, name+".log")})
}

// kill9 kills a service without letting it drain.
func (s *saga) kill9(name string) { s.procs[name].Kill() }

func (s *saga) waitReady(name string) {
	s.t.Helper()
	if err := s.procs[name].WaitReady(context.Background(), s.ops[name]+"/readyz", 60*time.Second); err != nil {
		s.t.Fatal(err)
	}
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testkit.Eventually(t, timeout, what, cond)
}

func (s *saga) stock(items map[string]int) {
	s.t.Helper()
	var lines []map[string]any
	for sku, q := range items {
		lines = append(lines, map[string]any{"sku": sku, "quantity": q})
	}
	s.post(s.invURL+"/admin/stock", map[string]any{"items": lines}, http.StatusOK, nil)
	for sku, q := range items {
		s.stocked.add(sku, q)
	}
}

func (s *saga) post(url string, body any, want int, into any) {
	s.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(url, s.orderURL+"/") {
		req.Header.Set("Authorization", "Bearer "+s.apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		s.t.Fatalf("POST %s: %s: %s", url, resp.Status, rb)
	}
	if into != nil {
		if err := json.Unmarshal(rb, into); err != nil {
			s.t.Fatal(err)
		}
	}
}

// order places an order for sku × qty paid with pm and returns its id.
func (s *saga) order(sku string, qty int, pm string) string {
	s.t.Helper()
	var o struct{ ID string }
	s.post(s.orderURL+"/orders", map[string]any{"customer_id": "cus_1", "currency": "EUR", "payment_method": pm,
		"items": []map[string]any{{"sku": sku, "quantity": qty, "unit_price": 1000}}}, http.StatusCreated, &o)
	return o.ID
}

type orderView struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	History []struct {
		Status string `json:"status"`
	} `json:"history"`
}

func (s *saga) getOrder(id string) orderView {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.orderURL+"/orders/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+s.apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var o orderView
	_ = json.NewDecoder(resp.Body).Decode(&o)
	return o
}

// terminal waits for the order to be CONFIRMED or CANCELLED and returns it.
func (s *saga) terminal(id string, timeout time.Duration) orderView {
	s.t.Helper()
	var o orderView
	eventually(s.t, timeout, "order "+id+" terminal", func() error {
		o = s.getOrder(id)
		if o.Status != "CONFIRMED" && o.Status != "CANCELLED" {
			return fmt.Errorf("status %q", o.Status)
		}
		return nil
	})
	return o
}

func (s *saga) scalar(pool *pgxpool.Pool, sql string, args ...any) string {
	s.t.Helper()
	var v any
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil {
		if strings.Contains(err.Error(), "no rows") {
			return ""
		}
		s.t.Fatal(err)
	}
	return fmt.Sprint(v)
}

func (s *saga) paymentStatus(orderID string) string {
	return s.scalar(s.payment, `select status from payments where order_id = $1`, orderID)
}

func (s *saga) reservation(orderID string) string {
	return s.scalar(s.inventory, `select status from reservations where order_id = $1`, orderID)
}

// stockOf returns available/reserved/committed of a SKU.
func (s *saga) stockOf(sku string) (avail, reserved, committed int64) {
	s.t.Helper()
	err := s.inventory.QueryRow(context.Background(), `select available, reserved, committed from stock where sku = $1`, sku).Scan(&avail, &reserved, &committed)
	if err != nil {
		s.t.Fatal(err)
	}
	return
}

// waitReservation waits for the order's reservation to reach status.
func (s *saga) waitReservation(orderID, status string) {
	s.t.Helper()
	s.waitStatus("reservation", status, func() string { return s.reservation(orderID) })
}

func (s *saga) waitPayment(orderID, status string) {
	s.t.Helper()
	s.waitStatus("payment", status, func() string { return s.paymentStatus(orderID) })
}

// waitStatus polls what's status until it is want.
func (s *saga) waitStatus(what, want string, status func() string) {
	s.t.Helper()
	eventually(s.t, 30*time.Second, what+" "+want, func() error {
		if got := status(); got != want {
			return fmt.Errorf("%s %q", what, got)
		}
		return nil
	})
}
