package idempotent

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

// tracer follows the global tracer provider (see kit.StartTracing).
var tracer = otel.Tracer("github.com/concordhq/concord/consumers/idempotent")

// AttrDuplicate marks the span of a record the group had processed before:
// it was acknowledged without calling the handler.
const AttrDuplicate = "concord.duplicate"

// eventContext is ctx as the work on d's event sees it: the trace of the
// record (the receive span franz-go's tracing hook put in its Context, or
// else the traceparent the relay set) and the event's correlation id, for
// the log lines written with it.
func eventContext(ctx context.Context, d decoded) context.Context {
	ctx = kit.WithCorrelationID(ctx, d.ev.CorrelationID)
	if d.rec.Context != nil {
		if sc := trace.SpanContextFromContext(d.rec.Context); sc.IsValid() {
			return trace.ContextWithSpanContext(ctx, sc)
		}
	}
	if sc := outbox.SpanContext(d.ev.Headers); sc.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// startEvent starts the consumer span of d's event, child of the span that
// published it.
func (r *Runner) startEvent(ctx context.Context, d decoded, duplicate bool) (context.Context, trace.Span) {
	ctx, span := tracer.Start(eventContext(ctx, d), "process "+d.ev.EventType, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("messaging.system", "kafka"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.consumer.group.name", r.cfg.Group),
			attribute.String("messaging.destination.name", d.rec.Topic),
			attribute.Int("messaging.destination.partition.id", int(d.rec.Partition)),
			attribute.Int64("messaging.kafka.offset", d.rec.Offset),
			attribute.String("messaging.message.id", d.ev.EventID),
			attribute.String("concord.event_type", d.ev.EventType),
			attribute.String("concord.correlation_id", d.ev.CorrelationID),
			attribute.String("concord.causation_id", d.ev.CausationID),
			attribute.Bool(AttrDuplicate, duplicate),
		)
	}
	return ctx, span
}

// markDuplicate records that d's event was seen again and skipped.
func (r *Runner) markDuplicate(ctx context.Context, d decoded) {
	_, span := r.startEvent(ctx, d, true)
	span.End()
}

// endSpan ends span with err as its status.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// batchEmitter is the emitter of a BatchHandler's call: each event it emits
// joins the trace of the event it names as its cause (CausationID), and an
// event naming none of the batch's joins the batch's span.
type batchEmitter struct {
	out   outbox.Emitter
	batch context.Context
	byID  map[string]context.Context
}

func (b batchEmitter) Emit(ev outbox.Event) (schemas.Envelope, error) {
	ctx, ok := b.byID[ev.CausationID]
	if !ok {
		ctx = b.batch
	}
	return b.out.Emit(outbox.Traced(ctx, ev))
}

// startBatch starts the span of each event handed to a BatchHandler and
// returns the context to call it with (the event's own when alone, else a
// batch span linked to every event's), the spans to end with its outcome,
// and the emitter that traces what it emits.
func (r *Runner) startBatch(ctx context.Context, ds []decoded, out outbox.Emitter) (context.Context, []trace.Span, outbox.Emitter) {
	spans := make([]trace.Span, 0, len(ds)+1)
	byID := make(map[string]context.Context, len(ds))
	links := make([]trace.Link, 0, len(ds))
	var ectx context.Context
	for _, d := range ds {
		var span trace.Span
		ectx, span = r.startEvent(ctx, d, false)
		spans = append(spans, span)
		byID[d.ev.EventID] = ectx
		links = append(links, trace.Link{SpanContext: span.SpanContext()})
	}
	bctx := ectx
	if len(ds) > 1 {
		var span trace.Span
		bctx, span = tracer.Start(ctx, "process batch", trace.WithLinks(links...))
		spans = append(spans, span)
		if span.SpanContext().IsValid() {
			bctx = context.WithValue(bctx, batchEventsKey{}, byID)
		}
	}
	return bctx, spans, batchEmitter{out: out, batch: bctx, byID: byID}
}

type batchEventsKey struct{}

// EventContext is the context of ev's own span within a BatchHandler's
// call, whose ctx is a batch span when it holds more than one event: what
// the handler does or stores for that one event (a row that later work
// continues from, see kit.Traceparent) then joins the event's trace.
// Elsewhere, and with tracing off, it is ctx: a Handler's ctx is its
// event's already.
func EventContext(ctx context.Context, ev Event) context.Context {
	if byID, ok := ctx.Value(batchEventsKey{}).(map[string]context.Context); ok {
		if ectx, ok := byID[ev.EventID]; ok {
			return ectx
		}
	}
	return ctx
}
