package publisher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/internal/relaytest"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
)

// In both modes, a row appended in a traced transaction is published with
// a traceparent naming the relay's publish span, itself the appending
// span's child; a row appended without a trace is published without one.
func TestRelaySpanContinuesTheAppendingTrace(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	for _, mode := range []string{"poll", "wal"} {
		t.Run(mode, func(t *testing.T) {
			k := testkit.NewKafka(t)
			w, topic := relaytest.WALTopic(t, k, 1, nil)
			var pool *pgxpool.Pool
			if mode == "wal" {
				pool = walPool(t)
				startWAL(t, pool, publisher.WALConfig{Config: publisher.Config{Kafka: k.Config()}})
			} else {
				pool = newPool(t)
				startRelay(t, publisher.Config{Pool: pool, Kafka: k.Config()})
			}

			ctx, appending := otel.Tracer("test").Start(context.Background(), "append")
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			traced, err := w.Append(ctx, tx, outbox.Event{Payload: relaytest.Data(relaytest.Keys(1)[0], 1, 0)})
			if err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			appending.End()
			relaytest.AppendWith(t, pool, w, relaytest.Keys(1)[0], 2, 0)

			recs := consume(t, k, topic, 2)
			headers := map[string]map[string]string{}
			for _, r := range recs {
				h := map[string]string{}
				for _, kv := range r.Headers {
					h[kv.Key] = string(kv.Value)
				}
				headers[h[schemas.HeaderEventID]] = h
			}
			for id, h := range headers {
				sc := outbox.SpanContext(h)
				if id != traced.EventID {
					if sc.IsValid() {
						t.Errorf("untraced row published with traceparent %q", h[schemas.HeaderTraceparent])
					}
					continue
				}
				if sc.TraceID() != appending.SpanContext().TraceID() {
					t.Fatalf("record's traceparent %q, want one in the appending trace %s", h[schemas.HeaderTraceparent], appending.SpanContext().TraceID())
				}
				testkit.Eventually(t, 10*time.Second, "the relay span", func() error {
					for _, s := range spans.GetSpans() {
						if s.SpanContext.SpanID() == sc.SpanID() {
							if s.Name != "publish "+topic || s.Parent.SpanID() != appending.SpanContext().SpanID() {
								return fmt.Errorf("the record's span is %q under %s; want publish %s under the appending span %s",
									s.Name, s.Parent.SpanID(), topic, appending.SpanContext().SpanID())
							}
							return nil
						}
					}
					return fmt.Errorf("no span %s among %d", sc.SpanID(), len(spans.GetSpans()))
				})
			}
		})
	}
}

// consume reads n records of topic from its start.
func consume(t *testing.T, k *testkit.Kafka, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := k.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	testkit.Eventually(t, 60*time.Second, fmt.Sprintf("%d records on %s", n, topic), func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		recs = append(recs, cl.PollFetches(ctx).Records()...)
		if len(recs) < n {
			return fmt.Errorf("%d records", len(recs))
		}
		return nil
	})
	return recs
}
