package idempotent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
)

// The consumer's series, as a service serves them on its ops server's
// /metrics, are promlint-clean and are exactly the ones the table of
// consumers/README.md lists; a handled record moves them.
func TestConsumerMetricsMatchTheReadmeAndLintClean(t *testing.T) {
	k := testkit.NewKafka(t)
	topic := k.CreateTopic(t, "readme", 1)
	group := testkit.UniqueName(t, "readme")
	pool := testkit.NewPool(t)
	migrate(t, pool)
	ops, err := kit.NewOpsServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ops.Run(ctx, testLogger(t), time.Second) }()
	t.Cleanup(func() { cancel(); <-done })

	start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k),
		Handler: insertEffect, Registerer: ops.Registry})
	id, v := event(t, "k1", 1)
	produce(t, k.Client(t), record(topic, "k1", id, v))

	url := "http://" + ops.Addr() + "/metrics"
	var m testkit.Metrics
	eventually(t, 60*time.Second, "the record applied and counted", func() error {
		if m, err = testkit.ScrapeErr(url); err != nil {
			return err
		}
		if got := m.Value("concord_consumer_events_total", map[string]string{"group": group, "outcome": "applied"}); got != 1 {
			return fmt.Errorf("applied %v", got)
		}
		if m.Value("concord_consumer_kafka_fetch_bytes_total", map[string]string{"group": group}) == 0 {
			return fmt.Errorf("no fetched bytes counted yet")
		}
		return nil
	})
	m.LintClean(t, "consumer /metrics")
	if diff := testkit.ReadSeriesTable(t, "../README.md").Diff(m, "concord_consumer_"); len(diff) > 0 {
		t.Errorf("consumers/README.md's series table and /metrics differ:\n%s", strings.Join(diff, "\n"))
	}
}
