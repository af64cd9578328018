package console_test

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

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/services/payment/paymentapi"
	"github.com/concordhq/concord/services/providersim"
)

// deployment is a small real saga: order-svc, inventory-svc and
// payment-svc as processes (each with its database, in-process relay and
// idempotent consumers) against the shared broker on a fresh topic prefix,
// and provider-sim in the test process. The console reads what they wrote.
type deployment struct {
	*env
	orderURL, invURL string
	orderKey         string // the order API's key, every scope
}

const (
	simKey    = "sk_test_console"
	simSecret = "whsec_console"
)

func startDeployment(t *testing.T) *deployment {
	t.Helper()
	bin := t.TempDir() + "/"
	if err := proc.GoBuild(".", bin, "../cmd/order-svc", "../cmd/inventory-svc", "../cmd/payment-svc"); err != nil {
		t.Fatal(err)
	}
	admin := testkit.PostgresURL(t)
	e := &env{t: t, kafka: testkit.NewKafka(t), prefix: testkit.UniqueName(t, "console") + "."}
	d := &deployment{env: e}
	// free[i] is service i's public API, free[3+i] its ops listener
	// (inventory-svc has only the latter, which serves /admin/stock).
	free, err := kit.FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"order-svc", "inventory-svc", "payment-svc"}
	url := func(i int) string { return fmt.Sprintf("http://127.0.0.1:%d", free[i]) }
	d.orderURL, d.invURL = url(0), url(3+1)
	keyFile := filepath.Join(t.TempDir(), "order-api-key")
	sim, err := providersim.New(providersim.Config{APIKey: simKey, WebhookEndpoints: []string{url(2) + "/webhooks/stripe"},
		WebhookEvents: paymentapi.Events, WebhookSecret: simSecret, WebhookBackoff: 200 * time.Millisecond, WebhookMaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(func() { ts.Close(); sim.Close() })
	dbs := []string{testkit.NewDatabase(t, admin), testkit.NewDatabase(t, admin), testkit.NewDatabase(t, admin)}
	extra := [][]string{
		{"ORDERS_DATABASE_URL=" + dbs[0], "CONCORD_API_KEY_FILE=" + keyFile},
		{"INVENTORY_DATABASE_URL=" + dbs[1]},
		{"PAYMENTS_DATABASE_URL=" + dbs[2], "PROVIDER_URL=" + ts.URL, "PROVIDER_API_KEY=" + simKey, "WEBHOOK_SECRET=" + simSecret,
			"PROVIDER_TIMEOUT=2s"},
	}
	logs := t.TempDir()
	procs := make([]*proc.Process, len(names))
	for i, n := range names {
		envv := append([]string{"CONCORD_TOPIC_PREFIX=" + e.prefix, "CONSUMER_GROUP=" + e.prefix + n,
			"KAFKA_BROKERS=" + strings.Join(e.kafka.Brokers, ","), fmt.Sprintf("CONCORD_HTTP_ADDR=127.0.0.1:%d", free[i]),
			fmt.Sprintf("CONCORD_OPS_ADDR=127.0.0.1:%d", free[3+i]),
			"TOPIC_PARTITIONS=3", "SHUTDOWN_GRACE=5s", "GROUP_SESSION_TIMEOUT=6s"}, extra[i]...)
		procs[i] = proc.Start(t, proc.Command{Name: n, Path: filepath.Join(bin, n), Env: envv, Log: filepath.Join(logs, n+".log")})
	}
	for i, p := range procs {
		if err := p.WaitReady(context.Background(), url(3+i)+"/readyz", 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	d.orderKey = strings.TrimSpace(string(key))
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(func() { _ = p.Stop(syscall.SIGTERM, 10*time.Second) })
		}
		wg.Wait()
	})
	e.orders, e.inventory, e.payments = testkit.Pool(t, dbs[0]), testkit.Pool(t, dbs[1]), testkit.Pool(t, dbs[2])
	e.serve()
	return d
}

func (d *deployment) post(url string, body any, want int, into any) {
	d.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if strings.HasPrefix(url, d.orderURL+"/") {
		req.Header.Set("Authorization", "Bearer "+d.orderKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		d.t.Fatalf("POST %s: %s: %s", url, resp.Status, rb)
	}
	if into != nil {
		if err := json.Unmarshal(rb, into); err != nil {
			d.t.Fatal(err)
		}
	}
}

func (d *deployment) stock(sku string, units int) {
	d.post(d.invURL+"/admin/stock", map[string]any{"items": []map[string]any{{"sku": sku, "quantity": units}}}, http.StatusOK, nil)
}

// order places an order and returns its id.
func (d *deployment) order(sku string, qty int, pm string) string {
	var o struct{ ID string }
	d.post(d.orderURL+"/orders", map[string]any{"customer_id": "cus_console", "currency": "EUR", "payment_method": pm,
		"items": []map[string]any{{"sku": sku, "quantity": qty, "unit_price": 1000}}}, http.StatusCreated, &o)
	return o.ID
}

// terminal waits until the order is CONFIRMED or CANCELLED and its last
// event is published, and returns "STATUS (reason)".
func (d *deployment) terminal(id string) string {
	d.t.Helper()
	var got string
	testkit.Eventually(d.t, 60*time.Second, "order "+id+" terminal", func() error {
		err := d.orders.QueryRow(context.Background(), `select status || coalesce(' (' || reason || ')', '') from orders o
			where id = $1 and terminal_at is not null
			  and not exists (select 1 from outbox where aggregate_id = $1::text and published_at is null)`, id).Scan(&got)
		if err != nil {
			return fmt.Errorf("not terminal yet: %w", err)
		}
		return nil
	})
	return got
}
