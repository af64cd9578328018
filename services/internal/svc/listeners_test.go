package svc_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
)

// listeners is a service running as its binary with both listeners.
type listeners struct {
	api, ops string // base URLs; api is empty for a service without a public API
}

// The operators' endpoints — /metrics, /healthz, /readyz, /debug/pprof/,
// inventory's /admin/stock and /stock — answer on the ops listener and
// not on the public one; the public API answers on its own listener and
// not on the ops one. Run on the real binaries, as operators start them.
func TestOpsEndpointsOnlyOnTheOpsListenerAndTheAPIOnlyOnItsOwn(t *testing.T) {
	bin := t.TempDir() + "/"
	if err := proc.GoBuild(".", bin, "../../cmd/order-svc", "../../cmd/inventory-svc", "../../cmd/payment-svc"); err != nil {
		t.Fatal(err)
	}
	admin := testkit.PostgresURL(t)
	brokers := strings.Join(testkit.NewKafka(t).Brokers, ",")
	prefix := testkit.UniqueName(t, "listeners") + "."
	ports, err := kit.FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "order-api-key")
	orderDB := testkit.NewDatabase(t, admin)
	svcs := map[string]listeners{}
	start := func(i int, name, db string, api bool, extra ...string) {
		ops := fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])
		args := append([]string{"--database-url", db, "--kafka-brokers", brokers, "--topic-prefix", prefix, "--group", prefix + name,
			"--topic-partitions", "1", "--ops-addr", ops, "--pprof"}, extra...)
		l := listeners{ops: "http://" + ops}
		if api {
			addr := fmt.Sprintf("127.0.0.1:%d", ports[2*i])
			args = append(args, "--http-addr", addr)
			l.api = "http://" + addr
		}
		p := proc.Start(t, proc.Command{Name: name, Path: bin + name, Args: args, Log: filepath.Join(t.TempDir(), name+".log")})
		t.Cleanup(func() { _ = p.Stop(syscall.SIGTERM, 10*time.Second) })
		if err := p.WaitReady(context.Background(), l.ops+"/readyz", 60*time.Second); err != nil {
			t.Fatal(err)
		}
		svcs[name] = l
	}
	start(0, "order-svc", orderDB, true, "--api-key-file", keyFile)
	start(1, "inventory-svc", testkit.NewDatabase(t, admin), false)
	start(2, "payment-svc", testkit.NewDatabase(t, admin), true, "--provider-url", "http://127.0.0.1:9",
		"--provider-api-key", "sk_test_listeners", "--webhook-secret", "whsec_listeners")
	b, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(b))

	do := func(method, url, auth, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const order = `{"customer_id":"cus_1","currency":"EUR","items":[{"sku":"SKU-1","quantity":1,"unit_price":100}]}`
	const stock = `{"items":[{"sku":"SKU-1","quantity":3}]}`
	opsOnly := []struct{ method, path, body string }{
		{"GET", "/metrics", ""}, {"GET", "/healthz", ""}, {"GET", "/readyz", ""}, {"GET", "/debug/pprof/", ""},
	}
	for _, name := range []string{"order-svc", "inventory-svc", "payment-svc"} {
		l := svcs[name]
		for _, e := range opsOnly {
			if got := do(e.method, l.ops+e.path, "", e.body); got != http.StatusOK {
				t.Errorf("%s: %s %s on the ops listener: %d; want 200", name, e.method, e.path, got)
			}
			if l.api == "" {
				continue
			}
			if got := do(e.method, l.api+e.path, key, e.body); got != http.StatusNotFound {
				t.Errorf("%s: %s %s on the public listener: %d; want 404", name, e.method, e.path, got)
			}
		}
	}
	// inventory-svc's stock endpoints are the operators'; it has no public
	// listener at all.
	inv := svcs["inventory-svc"]
	if got := do("POST", inv.ops+"/admin/stock", "", stock); got != http.StatusOK {
		t.Errorf("POST /admin/stock on inventory-svc's ops listener: %d; want 200", got)
	}
	if got := do("GET", inv.ops+"/stock", "", ""); got != http.StatusOK {
		t.Errorf("GET /stock on inventory-svc's ops listener: %d; want 200", got)
	}
	for _, l := range []listeners{svcs["order-svc"], svcs["payment-svc"]} {
		if got := do("POST", l.api+"/admin/stock", key, stock); got != http.StatusNotFound {
			t.Errorf("POST /admin/stock on %s: %d; want 404", l.api, got)
		}
	}
	out, err := exec.Command(bin+"inventory-svc", "--http-addr", "127.0.0.1:0", "--database-url", "postgres://nobody@127.0.0.1:1/none").CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "http-addr") {
		t.Errorf("inventory-svc --http-addr: exit %d %q; want 2 naming the flag (it has no public API)", code, out)
	}
	// The public APIs answer on their listeners only.
	ord, pay := svcs["order-svc"], svcs["payment-svc"]
	if got := do("POST", ord.api+"/orders", key, order); got != http.StatusCreated {
		t.Errorf("POST /orders on order-svc's public listener: %d; want 201", got)
	}
	if got := do("POST", ord.ops+"/orders", key, order); got != http.StatusNotFound {
		t.Errorf("POST /orders on order-svc's ops listener: %d; want 404", got)
	}
	if got := do("POST", pay.api+"/webhooks/stripe", "", "{}"); got == http.StatusNotFound {
		t.Errorf("POST /webhooks/stripe on payment-svc's public listener: 404; want it served (refused unsigned)")
	}
	if got := do("POST", pay.ops+"/webhooks/stripe", "", "{}"); got != http.StatusNotFound {
		t.Errorf("POST /webhooks/stripe on payment-svc's ops listener: %d; want 404", got)
	}

	// A key made and revoked with `order-svc keys` works between the two,
	// within its scope.
	keys := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		c := exec.Command(bin+"order-svc", append([]string{"keys"}, append(args, "--database-url", orderDB)...)...)
		c.Stdout, c.Stderr = &stdout, &stderr
		if err := c.Run(); err != nil {
			t.Fatalf("order-svc keys %v: %v\n%s", args, err, stderr.String())
		}
		return strings.TrimSpace(stdout.String())
	}
	reader := keys("create", "--name", "reader", "--scope", "orders:read")
	if got := do("GET", ord.api+"/orders", reader, ""); got != http.StatusOK {
		t.Errorf("GET /orders with a new orders:read key: %d; want 200", got)
	}
	if got := do("POST", ord.api+"/orders", reader, order); got != http.StatusForbidden {
		t.Errorf("POST /orders with an orders:read key: %d; want 403", got)
	}
	if list := keys("list"); !strings.Contains(list, "reader") || strings.Contains(list, reader) || strings.Contains(list, key) {
		t.Errorf("keys list:\n%s\nwant the reader key listed and no key shown", list)
	}
	var id string
	for _, line := range strings.Split(keys("list"), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "reader" {
			id = f[0]
		}
	}
	keys("revoke", id)
	if got := do("GET", ord.api+"/orders", reader, ""); got != http.StatusUnauthorized {
		t.Errorf("GET /orders with a revoked key: %d; want 401", got)
	}
}

func exitCode(err error) int {
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
