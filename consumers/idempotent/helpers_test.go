package idempotent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

// effectsDDL is the test handler's effect: deliberately without a unique
// constraint on event_id, so a second application shows as a second row
// instead of failing.
const effectsDDL = `CREATE TABLE effects (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id text NOT NULL,
    key text NOT NULL,
    seq int NOT NULL,
    topic text NOT NULL,
    partition int NOT NULL,
    "offset" bigint NOT NULL)`

// insertEffect is the handler of most tests: one row per application.
func insertEffect(ctx context.Context, tx pgx.Tx, ev idempotent.Event, _ outbox.Emitter) error {
	var d struct {
		Seq int `json:"seq"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return idempotent.Permanent(err)
	}
	_, err := tx.Exec(ctx, `INSERT INTO effects (event_id, key, seq, topic, partition, "offset") VALUES ($1,$2,$3,$4,$5,$6)`,
		ev.EventID, string(ev.Key), d.Seq, ev.Topic, ev.Partition, ev.Offset)
	return err
}

// insertEffects is the batch handlers' effect: one row per event, in one
// round trip.
func insertEffects(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error {
	var b pgx.Batch
	for _, ev := range evs {
		b.Queue(`INSERT INTO effects (event_id, key, seq, topic, partition, "offset") VALUES ($1,$2,0,$3,$4,$5)`,
			ev.EventID, string(ev.Key), ev.Topic, ev.Partition, ev.Offset)
	}
	return tx.SendBatch(ctx, &b).Close()
}

// migrate creates the runner's tables and the effects table.
func migrate(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	if err := idempotent.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, effectsDDL); err != nil {
		t.Fatal(err)
	}
}

// migrateWithOutbox is migrate plus the outbox, for handlers that emit.
func migrateWithOutbox(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	migrate(t, pool)
	if err := outbox.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
}

// event builds an order.created v2 envelope for key with a sequence number
// in its (open) data object.
func event(t testing.TB, key string, seq int) (id string, value []byte) {
	t.Helper()
	id = schemas.NewEventID()
	data, _ := json.Marshal(map[string]any{
		"order_id": schemas.NewEventID(), "customer_id": key, "currency": "EUR", "total_amount": 100,
		"items": []map[string]any{{"sku": "SKU-1", "quantity": 1, "unit_price": 100}}, "seq": seq,
	})
	b, err := schemas.Envelope{
		EventID: id, EventType: "order.created", EventVersion: 2, Timestamp: time.Now(),
		AggregateType: "order", AggregateID: key, CorrelationID: key, Data: data,
	}.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return id, b
}

func record(topic, key, id string, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(key), Value: value, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderEventID, Value: []byte(id)},
		{Key: schemas.HeaderEventType, Value: []byte("order.created")},
		{Key: schemas.HeaderContentType, Value: []byte(schemas.ContentTypeJSON)},
	}}
}

func produce(t testing.TB, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// running is a Runner started in a goroutine that the test owns.
type running struct {
	*idempotent.Runner
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// start runs a Runner until stop (or the end of the test).
func start(t testing.TB, cfg idempotent.Config) *running {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	if cfg.RetryBackoffMin == 0 {
		cfg.RetryBackoffMin, cfg.RetryBackoffMax = 50*time.Millisecond, 500*time.Millisecond
	}
	r, err := idempotent.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rr := &running{Runner: r, cancel: cancel, done: make(chan error, 1)}
	go func() { rr.done <- r.Run(ctx) }()
	t.Cleanup(func() { rr.stop(t) })
	return rr
}

// stop cancels the runner and waits for Run to return.
func (rr *running) stop(t testing.TB) {
	t.Helper()
	rr.once.Do(func() {
		rr.cancel()
		select {
		case err := <-rr.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("Run did not return within 60s of cancel")
		}
	})
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("CONSUMER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func kafkaConfig(k *testkit.Kafka) kit.KafkaConfig { return k.Config() }

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	testkit.Eventually(t, timeout, what, cond)
}

func count(t testing.TB, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	return testkit.Count(t, pool, sql, args...)
}

// countIs is a condition for eventually.
func countIs(t testing.TB, pool *pgxpool.Pool, want int, sql string, args ...any) func() error {
	return func() error {
		if n := count(t, pool, sql, args...); n != want {
			return fmt.Errorf("%s = %d, want %d", sql, n, want)
		}
		return nil
	}
}
