package sagatest

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/infra/testkit"
)

// metricsCountTheSagaAndLintClean: one confirmed order moves every series
// family the services export (their own, HTTP by route, pool, Kafka
// client), and each /metrics is promlint-clean. Scenarios run side by
// side on the same deployment, so only growth is asserted.
func metricsCountTheSagaAndLintClean(t *testing.T, s *saga) {
	scrape := func() map[string]testkit.Metrics {
		return map[string]testkit.Metrics{
			"order-svc":     testkit.Scrape(t, s.ops["order-svc"]+"/metrics"),
			"inventory-svc": testkit.Scrape(t, s.ops["inventory-svc"]+"/metrics"),
			"payment-svc":   testkit.Scrape(t, s.ops["payment-svc"]+"/metrics"),
			"provider-sim":  gather(t, s.sim.Metrics()),
		}
	}
	before := scrape()
	// The public listeners serve the API and nothing of the ops listener.
	for _, base := range []string{s.orderURL, s.payURL} {
		for _, path := range []string{"/metrics", "/healthz", "/readyz", "/admin/stock", "/stock", "/debug/pprof/"} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s%s on a public listener: %d; want 404", base, path, resp.StatusCode)
			}
		}
	}
	s.stock(map[string]int{"SKU-METRICS": 1})
	id := s.order("SKU-METRICS", 1, "pm_card_visa")
	if o := s.terminal(id, 30*time.Second); o.Status != "CONFIRMED" {
		t.Fatalf("order %s = %s (%s); want CONFIRMED", id, o.Status, o.Reason)
	}
	s.waitReservation(id, "COMMITTED")

	type grew struct {
		svc, name string
		labels    map[string]string
	}
	want := []grew{
		{"order-svc", "concord_order_status_transitions_total", map[string]string{"from": "none", "to": "PENDING"}},
		{"order-svc", "concord_order_status_transitions_total", map[string]string{"to": "CONFIRMED"}},
		{"order-svc", "concord_http_requests_total", map[string]string{"route": "/orders", "code": "201", "method": "POST"}},
		{"order-svc", "concord_http_request_duration_seconds", map[string]string{"route": "/orders", "method": "POST"}},
		{"order-svc", "concord_db_pool_acquires_total", map[string]string{"pool": "order-svc"}},
		{"order-svc", "concord_consumer_kafka_fetch_bytes_total", nil},
		{"order-svc", "concord_relay_kafka_produce_bytes_total", nil},
		{"inventory-svc", "concord_inventory_reservations_total", map[string]string{"outcome": "held"}},
		{"inventory-svc", "concord_inventory_reservations_total", map[string]string{"outcome": "committed"}},
		{"inventory-svc", "concord_http_requests_total", map[string]string{"route": "/admin/stock", "code": "200"}},
		{"payment-svc", "concord_db_pool_acquires_total", map[string]string{"pool": "payment-svc"}},
		{"payment-svc", "concord_consumer_kafka_fetch_bytes_total", nil},
		{"provider-sim", "concord_provider_sim_api_calls_total", map[string]string{"outcome": "ok"}},
	}
	// The relay publishes and the consumers commit after the order is
	// visible as CONFIRMED; poll until every series has moved.
	var missing []grew
	testkit.Eventually(t, 20*time.Second, "every metric family to grow", func() error {
		after := scrape()
		missing = missing[:0]
		for _, w := range want {
			if after[w.svc].Value(w.name, w.labels) <= before[w.svc].Value(w.name, w.labels) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("did not grow: %v", missing)
		}
		for svc, m := range after {
			m.LintClean(t, svc)
		}
		return nil
	})
}

func gather(t *testing.T, c prometheus.Collector) testkit.Metrics {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return testkit.Gather(t, reg)
}
