package idempotent

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/schemas"
)

// Within a batch handler's call, EventContext gives each event its own
// span (in the trace its record came with), not the batch's.
func TestEventContextIsTheEventsOwnSpanInABatch(t *testing.T) {
	kit.InstallTracerProvider(sdktrace.NewTracerProvider())
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	record := func(id string, traceID byte) decoded {
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{traceID}, SpanID: trace.SpanID{traceID}, TraceFlags: trace.FlagsSampled})
		return decoded{rec: &kgo.Record{Topic: "t", Context: trace.ContextWithSpanContext(context.Background(), sc)},
			ev: Event{Envelope: schemas.Envelope{EventID: id, EventType: "order.created"}}}
	}
	ds := []decoded{record("a", 1), record("b", 2)}
	r := &Runner{cfg: Config{Group: "g"}}
	bctx, spans, _ := r.startBatch(context.Background(), ds, nil)
	defer func() {
		for _, s := range spans {
			s.End()
		}
	}()
	batch := trace.SpanContextFromContext(bctx)
	for i, d := range ds {
		got := trace.SpanContextFromContext(EventContext(bctx, d.ev))
		if got.TraceID() != (trace.TraceID{byte(i + 1)}) || got.SpanID() != spans[i].SpanContext().SpanID() {
			t.Errorf("event %s: context of span %s in trace %s; want its own span %s in trace %x",
				d.ev.EventID, got.SpanID(), got.TraceID(), spans[i].SpanContext().SpanID(), i+1)
		}
	}
	if got := trace.SpanContextFromContext(EventContext(bctx, Event{Envelope: schemas.Envelope{EventID: "other"}})); !got.Equal(batch) {
		t.Errorf("an event not of the batch got span %s; want the batch's %s", got.SpanID(), batch.SpanID())
	}
}
