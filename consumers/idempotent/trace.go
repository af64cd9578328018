package idempotent

import (
	"context"
	"sync"

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
	if !kit.Tracing() {
		return eventContext(ctx, d), noSpan
	}
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

// noSpan is the span of work no tracer provider exports: it records
// nothing, so none is started (each would cost a context and the span's
// name, per event).
var noSpan = trace.SpanFromContext(context.Background())

// markDuplicate records that d's event was seen again and skipped.
func (r *Runner) markDuplicate(ctx context.Context, d decoded) {
	if !kit.Tracing() {
		return
	}
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
// event naming none of the batch's joins the batch's context.
type batchEmitter struct {
	out    outbox.Emitter
	batch  context.Context
	events eventContexts
}

func (b batchEmitter) Emit(ev outbox.Event) (schemas.Envelope, error) {
	ctx, ok := b.events.of(ev.CausationID)
	if !ok {
		ctx = b.batch
	}
	return b.out.Emit(outbox.Traced(ctx, ev))
}

// eventContexts are the contexts of a batch's events, by event id: what
// EventContext and the batch's emitter give for one event.
type eventContexts interface {
	of(eventID string) (context.Context, bool)
}

// spanContexts holds each event's span, started with the batch.
type spanContexts map[string]context.Context

func (m spanContexts) of(id string) (context.Context, bool) {
	ctx, ok := m[id]
	return ctx, ok
}

// lazyContexts makes an event's context (its trace and correlation id)
// when it is asked for: with no span to start, most handlers never ask.
type lazyContexts struct {
	ctx   context.Context
	ds    []decoded
	index func() map[string]int // event id → position in ds, made once
}

func newLazyContexts(ctx context.Context, ds []decoded) *lazyContexts {
	return &lazyContexts{ctx: ctx, ds: ds, index: sync.OnceValue(func() map[string]int {
		at := make(map[string]int, len(ds))
		for i, d := range ds {
			at[d.ev.EventID] = i
		}
		return at
	})}
}

func (l *lazyContexts) of(id string) (context.Context, bool) {
	i, ok := l.index()[id]
	if !ok {
		return nil, false
	}
	return eventContext(l.ctx, l.ds[i]), true
}

// startBatch starts the span of each event handed to a BatchHandler and
// returns the context to call it with (the event's own when alone, else a
// batch span linked to every event's), the spans to end with its outcome,
// and the emitter that traces what it emits. With no tracer provider
// exporting, it starts no span: the handler's context is the event's when
// alone, else ctx, and an event's own is made when asked for.
func (r *Runner) startBatch(ctx context.Context, ds []decoded, out outbox.Emitter) (context.Context, []trace.Span, outbox.Emitter) {
	if !kit.Tracing() {
		if len(ds) == 1 {
			ectx := eventContext(ctx, ds[0])
			return ectx, nil, outbox.TracedEmitter(ectx, out)
		}
		events := newLazyContexts(ctx, ds)
		return context.WithValue(ctx, batchEventsKey{}, eventContexts(events)), nil, batchEmitter{out: out, batch: ctx, events: events}
	}
	spans := make([]trace.Span, 0, len(ds)+1)
	byID := make(spanContexts, len(ds))
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
			bctx = context.WithValue(bctx, batchEventsKey{}, eventContexts(byID))
		}
	}
	return bctx, spans, batchEmitter{out: out, batch: bctx, events: byID}
}

type batchEventsKey struct{}

// EventContext is the context of ev within a BatchHandler's call, whose ctx
// is the batch's when it holds more than one event: ev's own span, or with
// tracing off the trace its record came with and its correlation id. What
// the handler does or stores for that one event (a row that later work
// continues from, see kit.Traceparent) then joins the event's trace.
// Elsewhere it is ctx: a Handler's ctx is its event's already.
func EventContext(ctx context.Context, ev Event) context.Context {
	if events, ok := ctx.Value(batchEventsKey{}).(eventContexts); ok {
		if ectx, ok := events.of(ev.EventID); ok {
			return ectx
		}
	}
	return ctx
}
