package publisher

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

// tracer follows the global tracer provider, so a process that installs
// one after this package loaded still gets its spans.
var tracer = otel.Tracer("github.com/concordhq/concord/relay/publisher")

// traceContext writes the traceparent header whatever the process's global
// propagator is: the header is part of the record format.
var traceContext propagation.TraceContext

// withTrace gives rec the trace its outbox row stored, for publishTracing.
// A row without one (written with tracing off) is produced as before.
func withTrace(rec *kgo.Record, headers map[string]string) *kgo.Record {
	if sc := outbox.SpanContext(headers); sc.IsValid() {
		rec.Context = trace.ContextWithRemoteSpanContext(context.Background(), sc)
	}
	return rec
}

// publishTracing is the producer hook that makes the relay's hop part of
// the business transaction's trace: each record whose row stored a
// traceparent gets a producer span, child of the span that appended the
// row, which lasts until the record's answer and whose context replaces
// the record's traceparent, so a consumer's span is the relay span's child.
// It sits on the relay's client (ProducerOpts) in poll and WAL mode alike.
type publishTracing struct{}

func (publishTracing) OnProduceRecordBuffered(r *kgo.Record) {
	if r.Context == nil || !trace.SpanContextFromContext(r.Context).IsValid() {
		return
	}
	ctx, span := tracer.Start(r.Context, "publish "+r.Topic, trace.WithSpanKind(trace.SpanKindProducer))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", r.Topic),
			attribute.String("messaging.message.id", header(r, schemas.HeaderEventID)),
			attribute.String("concord.event_type", header(r, schemas.HeaderEventType)),
		)
	}
	h := map[string]string{}
	traceContext.Inject(ctx, propagation.MapCarrier(h))
	for k, v := range h {
		setHeader(r, k, v)
	}
	r.Context = ctx
}

func (publishTracing) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if r.Context == nil {
		return
	}
	span := trace.SpanFromContext(r.Context)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.Int("messaging.destination.partition.id", int(r.Partition)),
		attribute.Int64("messaging.kafka.offset", r.Offset))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func setHeader(r *kgo.Record, key, value string) {
	for i, h := range r.Headers {
		if h.Key == key {
			r.Headers[i].Value = []byte(value)
			return
		}
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: key, Value: []byte(value)})
}
