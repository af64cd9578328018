package kit_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
)

// Requests count under the pattern that matched, including the pattern of
// a mux mounted on the ops server's: ids in paths never become labels.
func TestOpsServerCountsRequestsByRoute(t *testing.T) {
	ops, err := kit.NewOpsServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "missing" {
			http.Error(w, "no such order", http.StatusNotFound)
		}
	})
	ops.Mux.Handle("/", api)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ops.Run(ctx, discardLogger(), time.Second) }()
	t.Cleanup(func() { cancel(); <-done })

	base := "http://" + ops.Addr()
	for _, p := range []string{"/orders/a1", "/orders/b2", "/orders/missing", "/nowhere/x"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	requests := func(route, code string) float64 {
		return counterValue(t, ops.Registry, "concord_http_requests_total", map[string]string{"route": route, "code": code, "method": "GET"})
	}
	if got := requests("/orders/{id}", "200"); got != 2 {
		t.Errorf(`requests{route="/orders/{id}",code="200"} = %v, want 2`, got)
	}
	if got := requests("/orders/{id}", "404"); got != 1 {
		t.Errorf(`requests{route="/orders/{id}",code="404"} = %v, want 1`, got)
	}
	if got := requests("unmatched", "404"); got != 1 {
		t.Errorf(`requests{route="unmatched",code="404"} = %v, want 1`, got)
	}
	if n := testutil.CollectAndCount(ops.Registry, "concord_http_requests_total"); n != 3 {
		t.Errorf("%d request series, want 3 (one per route and code)", n)
	}
	if n := testutil.CollectAndCount(ops.Registry, "concord_http_request_duration_seconds"); n != 2 {
		t.Errorf("%d duration series, want 2 (one per route)", n)
	}
	lintClean(t, ops.Registry)
}

func TestRouteOfDropsTheMethod(t *testing.T) {
	for in, want := range map[string]string{"": "unmatched", "GET /orders/{id}": "/orders/{id}", "/": "/", "POST example.com/x": "example.com/x"} {
		if got := kit.RouteOf(in); got != want {
			t.Errorf("RouteOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPoolStatsFollowThePool(t *testing.T) {
	pool := testkit.NewPool(t)
	reg := prometheus.NewRegistry()
	if err := kit.RegisterPool(reg, "orders", pool); err != nil {
		t.Fatal(err)
	}
	if err := kit.RegisterPool(reg, "payments", testkit.NewPool(t)); err != nil {
		t.Fatalf("a second pool on the same registry: %v", err)
	}
	acquires := func() float64 {
		return counterValue(t, reg, "concord_db_pool_acquires_total", map[string]string{"pool": "orders"})
	}
	before := acquires()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := counterValue(t, reg, "concord_db_pool_acquired_connections", map[string]string{"pool": "orders"}); got != 1 {
		t.Errorf("acquired_connections = %v while one is held, want 1", got)
	}
	conn.Release()
	if got := acquires(); got != before+1 {
		t.Errorf("acquires_total %v -> %v, want one more", before, got)
	}
	lintClean(t, reg)
}

func TestKafkaClientMetrics(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	reg := prometheus.NewRegistry()
	ctx := context.Background()
	cfg := kit.KafkaConfig{Brokers: c.ListenAddrs()}
	cl, err := kit.NewKafkaClient(ctx, cfg, nil, kit.KafkaMetrics(reg, "relay", nil))
	if err != nil {
		t.Fatal(err)
	}
	// A second client of the same subsystem must not take the process down.
	cl2, err := kit.NewKafkaClient(ctx, cfg, nil, kit.KafkaMetrics(reg, "relay", nil))
	if err != nil {
		t.Fatal(err)
	}
	cl2.Close()
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The client counts a written batch in a hook that may run after the
	// record's promise: poll, with a deadline.
	testkit.Eventually(t, 10*time.Second, "produce_bytes_total above 0 after a record was produced", func() error {
		if got := counterValue(t, reg, "concord_relay_kafka_produce_bytes_total", nil); got <= 0 {
			return fmt.Errorf("produce_bytes_total = %v", got)
		}
		return nil
	})
	lintClean(t, reg)
}

// counterValue sums the samples of family name whose labels include want.
func counterValue(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func lintClean(t *testing.T, g prometheus.Gatherer) {
	t.Helper()
	problems, err := promlint.NewWithMetricFamilies(mustGather(t, g)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range problems {
		lines = append(lines, p.Metric+": "+p.Text)
	}
	if len(lines) > 0 {
		t.Errorf("promlint:\n%s", strings.Join(lines, "\n"))
	}
}

func mustGather(t *testing.T, g prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}
