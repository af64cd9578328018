package outbox

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/schemas"
)

// traceContext is the W3C propagator whatever the process's global one is:
// the traceparent header is part of the record format (see
// schemas.HeaderTraceparent), not a choice of the deployment.
var traceContext propagation.TraceContext

// Traced is ev carrying the trace of ctx's span in its traceparent header,
// so the relay publishes it into the business transaction's trace. An
// event that names a traceparent already, or a ctx without a span
// (tracing off), is left as it is. Append and Emitting do this
// themselves; a Buffer's Emit has no context, and the consumer runner
// gives its handlers an emitter that does (see TracedEmitter).
func Traced(ctx context.Context, ev Event) Event {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ev
	}
	if _, ok := ev.Headers[schemas.HeaderTraceparent]; ok {
		return ev
	}
	h := make(map[string]string, len(ev.Headers)+2)
	maps.Copy(h, ev.Headers)
	traceContext.Inject(ctx, propagation.MapCarrier(h))
	ev.Headers = h
	return ev
}

// TracedEmitter is out with every event emitted through it Traced by ctx.
func TracedEmitter(ctx context.Context, out Emitter) Emitter {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return out
	}
	return tracedEmitter{ctx: ctx, out: out}
}

type tracedEmitter struct {
	ctx context.Context
	out Emitter
}

func (t tracedEmitter) Emit(ev Event) (schemas.Envelope, error) { return t.out.Emit(Traced(t.ctx, ev)) }

// SpanContext is the trace context a record's or row's headers carry in
// their traceparent (and tracestate), invalid when they carry none.
func SpanContext(headers map[string]string) trace.SpanContext {
	if headers[schemas.HeaderTraceparent] == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.MapCarrier(headers)))
}
