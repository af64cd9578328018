package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/internal/relaytest"
)

// The relay's /metrics is promlint-clean, and the table of relay/README.md
// lists exactly the concord_ series it exports: published rows move the
// relay's counters, its Kafka client's and its pool's.
func TestRelayMetricsMatchTheReadmeAndLintClean(t *testing.T) {
	k := testkit.NewKafka(t)
	url, _ := newOutbox(t)
	pool := testkit.Pool(t, url)
	topic := k.CreateTopic(t, "readme", 1)
	relaytest.Fill(t, pool, topic, relaytest.Keys(3), 2, 0)
	p := relaytest.StartRelay(t, "relay-readme", url, k, "--metrics-interval", "100ms")
	addr := relaytest.HTTPAddr(t, p, 30*time.Second)

	var m testkit.Metrics
	relaytest.WaitFor(t, 60*time.Second, "six rows published", func() error {
		var err error
		if m, err = testkit.ScrapeErr("http://" + addr + "/metrics"); err != nil {
			return err
		}
		if got := m.Value("concord_relay_published_total", map[string]string{"topic": topic}); got != 6 {
			return fmt.Errorf("published %v", got)
		}
		if m.Value("concord_relay_kafka_produce_bytes_total", nil) == 0 || m.Value("concord_db_pool_acquires_total", map[string]string{"pool": "relay"}) == 0 {
			return fmt.Errorf("no Kafka or pool activity counted yet")
		}
		if m.Value("concord_http_requests_total", map[string]string{"route": "/metrics"}) == 0 {
			return fmt.Errorf("the scrapes themselves are not counted yet")
		}
		return nil
	})
	m.LintClean(t, "relay /metrics")
	if diff := testkit.ReadSeriesTable(t, "../../README.md").Diff(m, "concord_"); len(diff) > 0 {
		t.Errorf("relay/README.md's series table and /metrics differ:\n%s", strings.Join(diff, "\n"))
	}
}
