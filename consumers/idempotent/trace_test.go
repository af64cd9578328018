package idempotent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// syncBuffer is a log sink the runner's goroutines write to while the test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// An event appended in a traced transaction travels in that trace: the
// relay's publish span is the appending span's child, the handler's span
// descends from the relay's, the event the handler emits carries the
// handler's trace and names its cause, the lines the handler logs carry the
// trace, and a redelivered record adds a span marked duplicate without a
// second effect.
func TestTraceFollowsTheEventThroughRelayAndHandler(t *testing.T) {
	spans := testkit.Spans()

	k := testkit.NewKafka(t)
	pool := testkit.NewPool(t)
	migrateWithOutbox(t, pool)
	ctx := context.Background()
	prefix := testkit.UniqueName(t, "tr") + "."
	topic := prefix + contract.TypeOrderCreated.Topic()
	adm := k.Admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic) })
	w := outbox.Writer{TopicPrefix: prefix}

	// The business transaction: a request's span appends order.created.
	reqCtx, req := otel.Tracer("test").Start(ctx, "POST /orders")
	tx, err := pool.Begin(reqCtx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	created, err := w.Append(reqCtx, tx, outbox.Event{Payload: contract.OrderCreatedV2{OrderID: schemas.NewEventID(), CustomerID: "c-1",
		Currency: "EUR", TotalAmount: 100, Items: []contract.OrderCreatedV2Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: 100}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(reqCtx); err != nil {
		t.Fatal(err)
	}
	req.End()
	trace0 := req.SpanContext().TraceID()

	rl, err := publisher.New(publisher.Config{Pool: pool, Kafka: k.Config(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Background(t, rl.Run)

	logs := &syncBuffer{}
	log := slog.New(kit.ContextHandler{Handler: slog.NewJSONHandler(logs, nil)})
	var mux idempotent.Mux
	idempotent.Handle(&mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.OrderCreatedV2, out outbox.Emitter) error {
		log.InfoContext(ctx, "confirming order", "order_id", d.OrderID)
		if _, err := out.Emit(outbox.CausedBy(ev.Envelope, contract.OrderConfirmedV1{OrderID: d.OrderID})); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO effects (event_id, key, seq, topic, partition, "offset") VALUES ($1,$2,0,$3,$4,$5)`,
			ev.EventID, string(ev.Key), ev.Topic, ev.Partition, ev.Offset)
		return err
	})
	group := testkit.UniqueName(t, "g")
	start(t, idempotent.Config{Group: group, Topics: []string{topic}, Pool: pool, Kafka: kafkaConfig(k),
		Handler: mux.Handle, Types: mux.Types(), Outbox: w})

	eventually(t, 60*time.Second, "the handler applied order.created", countIs(t, pool, 1, `SELECT count(*) FROM effects`))
	handler := waitSpan(t, spans, func(s tracetest.SpanStub) bool {
		return s.Name == "process order.created" && testkit.SpanAttr(s, idempotent.AttrDuplicate) == "false"
	})
	if got := handler.SpanContext.TraceID(); got != trace0 {
		t.Fatalf("handler span in trace %s, want the appending request's %s", got, trace0)
	}
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		byID[s.SpanContext.SpanID()] = s
	}
	// Up from the handler: (franz-go's receive span,) the relay's publish
	// span, then the request's span.
	var path []string
	var relaySpan tracetest.SpanStub
	for s, ok := handler, true; ok; s, ok = byID[s.Parent.SpanID()] {
		path = append(path, s.Name)
		if s.Name == "publish "+topic {
			relaySpan = s
		}
	}
	if !relaySpan.SpanContext.IsValid() || relaySpan.Parent.SpanID() != req.SpanContext().SpanID() {
		t.Fatalf("spans from the handler up: %v; want the relay's publish %s span, child of the request's", path, topic)
	}
	if path[len(path)-1] != "POST /orders" {
		t.Fatalf("spans from the handler up: %v; want them to end at the request", path)
	}

	// What the handler emitted: its trace, its cause, its correlation.
	var payload []byte
	var headers map[string]string
	if err := pool.QueryRow(ctx, `SELECT payload::text::bytea, headers FROM outbox WHERE event_type = 'order.confirmed'`).Scan(&payload, &headers); err != nil {
		t.Fatal(err)
	}
	env, err := schemas.DecodeEnvelope(payload)
	if err != nil {
		t.Fatal(err)
	}
	if env.CausationID != created.EventID || env.CorrelationID != created.CorrelationID {
		t.Errorf("emitted event caused by %q in correlation %q; want %q in %q", env.CausationID, env.CorrelationID, created.EventID, created.CorrelationID)
	}
	if sc := outbox.SpanContext(headers); sc.TraceID() != trace0 || sc.SpanID() != handler.SpanContext.SpanID() {
		t.Errorf("emitted event's traceparent %q; want the handler span %s of trace %s", headers[schemas.HeaderTraceparent], handler.SpanContext.SpanID(), trace0)
	}

	// The handler's log line carries the trace.
	line := logLine(t, logs.String(), "confirming order")
	if line["trace_id"] != trace0.String() || line["span_id"] != handler.SpanContext.SpanID().String() || line["correlation_id"] != created.CorrelationID {
		t.Errorf("handler's log line %v; want trace_id %s, span_id %s, correlation_id %s", line, trace0, handler.SpanContext.SpanID(), created.CorrelationID)
	}

	// The record again, as a redelivery would bring it.
	var value []byte
	if err := pool.QueryRow(ctx, `SELECT payload::text::bytea FROM outbox WHERE event_id = $1`, created.EventID).Scan(&value); err != nil {
		t.Fatal(err)
	}
	produce(t, k.Client(t), &kgo.Record{Topic: topic, Key: []byte(created.AggregateID), Value: value, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderEventID, Value: []byte(created.EventID)},
		{Key: schemas.HeaderEventType, Value: []byte(created.EventType)},
		{Key: schemas.HeaderContentType, Value: []byte(schemas.ContentTypeJSON)},
		{Key: schemas.HeaderTraceparent, Value: []byte(fmt.Sprintf("00-%s-%s-01", trace0, relaySpan.SpanContext.SpanID()))},
	}})
	dup := waitSpan(t, spans, func(s tracetest.SpanStub) bool {
		return s.Name == "process order.created" && testkit.SpanAttr(s, idempotent.AttrDuplicate) == "true"
	})
	if dup.SpanContext.TraceID() != trace0 {
		t.Errorf("duplicate's span in trace %s, want %s", dup.SpanContext.TraceID(), trace0)
	}
	eventually(t, 30*time.Second, "the redelivery committed", func() error {
		if n := count(t, pool, `SELECT count(*) FROM processed_events WHERE consumer_group = $1`, group); n != 1 {
			return fmt.Errorf("%d processed events", n)
		}
		return nil
	})
	if n := count(t, pool, `SELECT count(*) FROM effects`); n != 1 {
		t.Fatalf("%d effects after the redelivery, want 1", n)
	}
}

// Within a batch handler's call, EventContext gives each event its own
// span (in the trace its record came with), not the batch's.
func TestEventContextIsTheEventsOwnSpanInABatch(t *testing.T) {
	testkit.Spans()
	recordContext := func(traceID byte) context.Context {
		return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{traceID}, SpanID: trace.SpanID{traceID}, TraceFlags: trace.FlagsSampled}))
	}
	evs := []idempotent.Event{{Envelope: schemas.Envelope{EventID: "a", EventType: string(contract.TypeOrderCreated)}},
		{Envelope: schemas.Envelope{EventID: "b", EventType: string(contract.TypeOrderCreated)}}}
	bctx, spans := idempotent.StartBatch(context.Background(), evs, []context.Context{recordContext(1), recordContext(2)})
	defer func() {
		for _, s := range spans {
			s.End()
		}
	}()
	for i, ev := range evs {
		got := trace.SpanContextFromContext(idempotent.EventContext(bctx, ev))
		if got.TraceID() != (trace.TraceID{byte(i + 1)}) || got.SpanID() != spans[i].SpanContext().SpanID() {
			t.Errorf("event %s: context of span %s in trace %s; want its own span %s in trace %x",
				ev.EventID, got.SpanID(), got.TraceID(), spans[i].SpanContext().SpanID(), i+1)
		}
	}
	batch := trace.SpanContextFromContext(bctx)
	if got := trace.SpanContextFromContext(idempotent.EventContext(bctx, idempotent.Event{Envelope: schemas.Envelope{EventID: "other"}})); !got.Equal(batch) {
		t.Errorf("an event not of the batch got span %s; want the batch's %s", got.SpanID(), batch.SpanID())
	}
}

// waitSpan polls the exporter for the first span match accepts.
func waitSpan(t *testing.T, spans *tracetest.InMemoryExporter, match func(tracetest.SpanStub) bool) tracetest.SpanStub {
	t.Helper()
	var found tracetest.SpanStub
	eventually(t, 60*time.Second, "the span", func() error {
		for _, s := range spans.GetSpans() {
			if match(s) {
				found = s
				return nil
			}
		}
		return fmt.Errorf("not among the %d spans ended", len(spans.GetSpans()))
	})
	return found
}

// logLine is the JSON log line whose message is msg.
func logLine(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	for l := range strings.Lines(logs) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no log line %q in:\n%s", msg, logs)
	return nil
}
