package idempotent

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

// TestConcurrentDeliveriesOfOneEventHaveOneEffect protects insert-first
// dedupe: two transactions applying the same event at the same time (a
// rebalance hand-over, a relay that published a row twice to two
// partitions) must yield exactly one effect. A check-then-insert runner
// lets both see "not processed yet" and both run the handler.
//
// The first delivery to reach its handler holds its transaction open until
// the other delivery has either reached its handler too (check-then-insert)
// or is waiting in PostgreSQL on the first one's dedupe row (insert-first);
// only then does it write its effect and commit. Both interleavings are
// therefore forced, not left to timing.
func TestConcurrentDeliveriesOfOneEventHaveOneEffect(t *testing.T) {
	pool := testkit.NewPool(t)
	ctx := context.Background()
	if err := Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE race_effects (event_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	inHandler := make(chan struct{}, 2)
	otherArrived := func(ctx context.Context) error {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if len(inHandler) == 2 {
				return nil // both deliveries are in the handler
			}
			var waiting int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%processed_events%'`).Scan(&waiting)
			if err != nil {
				return err
			}
			if waiting > 0 {
				return nil // the other delivery waits on our dedupe row
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	handler := func(ctx context.Context, tx pgx.Tx, ev Event, _ outbox.Emitter) error {
		inHandler <- struct{}{}
		if err := otherArrived(ctx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO race_effects (event_id) VALUES ($1)`, ev.EventID)
		return err
	}
	r, err := NewRunner(Config{Group: testkit.UniqueName(t, "race"), Topics: []string{"orders"}, Pool: pool,
		Kafka: kit.KafkaConfig{Brokers: []string{"unused:9092"}}, Handler: handler, Catalog: schemas.MustDefault()})
	if err != nil {
		t.Fatal(err)
	}

	id := schemas.NewEventID()
	data, _ := json.Marshal(map[string]any{"order_id": id, "customer_id": "c", "currency": "EUR", "total_amount": 1,
		"items": []map[string]any{{"sku": "A", "quantity": 1, "unit_price": 1}}})
	value, err := schemas.Envelope{EventID: id, EventType: "order.created", EventVersion: 2, Timestamp: time.Now(),
		AggregateType: "order", AggregateID: "o", CorrelationID: "o", Data: data}.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		res batchResult
		err error
	}
	outcomes := make(chan outcome, 2)
	start := make(chan struct{})
	for p := int32(0); p < 2; p++ {
		// The same event at two positions, as after a duplicate publish.
		rec := &kgo.Record{Topic: "orders", Partition: p, Offset: 7, Value: value}
		go func() {
			<-start
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			res, err := r.applyBatch(ctx, []decoded{decodeRecord(r.cfg.Catalog, r.handles, rec)})
			outcomes <- outcome{res, err}
		}()
	}
	close(start)
	var applied, dupes int
	for range 2 {
		o := <-outcomes
		if o.err != nil {
			t.Fatalf("apply: %v", o.err)
		}
		for _, c := range o.res {
			applied += c.applied
			dupes += c.duplicates
		}
	}
	var effects int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM race_effects WHERE event_id = $1`, id).Scan(&effects); err != nil {
		t.Fatal(err)
	}
	if effects != 1 || applied != 1 || dupes != 1 {
		t.Fatalf("two concurrent deliveries: %d effects, %d applied, %d duplicates; want 1, 1, 1", effects, applied, dupes)
	}
}
