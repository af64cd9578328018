package idempotent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

// TestPolledRecordsStayWithinMaxBufferedBytes protects the memory bound: a
// topic ten times larger than MaxBufferedBytes, consumed by a handler much
// slower than the broker, never has more than the budget (plus one record,
// the granularity of a poll) polled and not yet applied; every event is
// still applied once, and once all are applied the runner holds nothing.
func TestPolledRecordsStayWithinMaxBufferedBytes(t *testing.T) {
	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrate(t, pool)
	topic := k.CreateTopic(t, "big", 4)

	const n, limit = 400, 512 << 10
	pad := strings.Repeat("x", 16<<10)
	recs := make([]*kgo.Record, n)
	largest := 0
	for i := range recs {
		key := fmt.Sprintf("k%d", i%20)
		id := schemas.NewEventID()
		data, _ := json.Marshal(map[string]any{"order_id": id, "customer_id": key, "currency": "EUR", "total_amount": 100,
			"items": []map[string]any{{"sku": "SKU-1", "quantity": 1, "unit_price": 100}}, "seq": i, "note": pad})
		v, err := schemas.Envelope{EventID: id, EventType: "order.created", EventVersion: 2, Timestamp: time.Now(),
			AggregateType: "order", AggregateID: key, CorrelationID: key, Data: data}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = record(topic, key, id, v)
		largest = max(largest, len(v)+len(key)+1024) // headers and the per-record allowance
	}
	produce(t, k.Client(t), recs...)

	// The handler's work is slow next to fetching from a local broker:
	// without the bound the runner would queue the whole topic meanwhile.
	handler := func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, _ outbox.Emitter) error {
		if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.05)`); err != nil {
			return err
		}
		return insertEffects(ctx, tx, evs)
	}
	r := start(t, idempotent.Config{Group: testkit.UniqueName(t, "g"), Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k),
		BatchHandler: handler, MaxBatchRecords: 10, MaxConcurrentPartitions: 2, MaxBufferedBytes: limit})
	eventually(t, 120*time.Second, "every event applied", countIs(t, pool, n, `SELECT count(DISTINCT event_id) FROM effects`))
	if got := count(t, pool, `SELECT count(*) FROM effects`); got != n {
		t.Errorf("effects = %d for %d events", got, n)
	}
	s := r.Stats()
	if s.PeakBufferedBytes > limit+int64(largest) {
		t.Errorf("the runner held %d bytes of polled records at its peak; MaxBufferedBytes is %d (records are ≤ %d bytes)",
			s.PeakBufferedBytes, limit, largest)
	}
	if s.PeakBufferedBytes < limit/2 {
		t.Errorf("peak %d bytes: the runner never used half its budget, so this test bounds nothing", s.PeakBufferedBytes)
	}
	eventually(t, 10*time.Second, "nothing held once all is applied", func() error {
		if b := r.Stats().BufferedBytes; b != 0 {
			return fmt.Errorf("%d bytes still held", b)
		}
		return nil
	})
}
