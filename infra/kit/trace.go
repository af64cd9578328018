package kit

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracing is set once StartTracing installed an exporting tracer provider.
// The HTTP, pgx and Kafka instrumentation is added only then, so that a
// binary without OTEL_* configuration runs exactly the code it would
// without tracing support.
var tracing atomic.Bool

// Tracing reports whether this process exports traces.
func Tracing() bool { return tracing.Load() }

// TracingConfigured reports whether the OTEL_* environment asks for traces:
// an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER=otlp, and
// neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none. Unlike the
// SDK's own default (export to localhost), nothing configured means off.
func TracingConfigured() bool {
	if off, _ := strconv.ParseBool(os.Getenv("OTEL_SDK_DISABLED")); off {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Trace is StartTracing for a binary's main: the returned stop flushes the
// spans still buffered (for at most 5s) and logs what it could not.
func Trace(ctx context.Context, service string, log *slog.Logger) (stop func(), err error) {
	shutdown, err := StartTracing(ctx, service)
	if err != nil {
		return func() {}, fmt.Errorf("tracing: %w", err)
	}
	if Tracing() {
		log.Info("exporting traces over OTLP")
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn("flushing traces", "err", err)
		}
	}, nil
}

// StartTracing installs the global tracer provider and the W3C trace-context
// propagator when TracingConfigured, exporting over OTLP with the protocol
// of OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL
// ("grpc" or "http/protobuf", the default); every other setting (headers,
// timeouts, sampler, resource attributes, OTEL_SERVICE_NAME over service)
// is the SDK's reading of its OTEL_* variables. Call it once, before the
// servers, pools and Kafka clients are built, and call stop on the way out
// to flush the spans still buffered. Unconfigured, it installs nothing and
// stop does nothing.
func StartTracing(ctx context.Context, service string) (stop func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if !TracingConfigured() {
		return noop, nil
	}
	exp, err := newSpanExporter(ctx)
	if err != nil {
		return noop, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service), semconv.ServiceVersion(BuildInfo().Version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && res == nil {
		return noop, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	InstallTracerProvider(tp)
	return tp.Shutdown, nil
}

// InstallTracerProvider makes tp the global tracer provider, with the W3C
// trace-context and baggage propagators, and turns on the instrumentation
// kit adds to servers, pools and Kafka clients built afterwards. Tests
// install one with an in-memory exporter.
func InstallTracerProvider(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	tracing.Store(true)
}

func newSpanExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	proto := cmpEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch proto {
	case "grpc":
		return otlptracegrpc.New(ctx)
	case "", "http/protobuf":
		return otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want grpc or http/protobuf", proto)
	}
}

func cmpEnv(keys ...string) string {
	for _, k := range keys {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
	}
	return ""
}

// traceHTTP wraps a server's handler in a span per request (the caller's
// traceparent, if any, is its parent) when tracing is on.
func traceHTTP(h http.Handler, listener string) http.Handler {
	if !Tracing() {
		return h
	}
	return otelhttp.NewHandler(h, listener, otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		if r.Pattern != "" {
			return r.Pattern
		}
		return r.Method
	}))
}

// HTTPTransport is base (http.DefaultTransport when nil) sending the
// caller's trace context and recording a client span per request made
// under a span when tracing is on; off, it is base unchanged. Requests
// made outside any span (a poller's) make no trace of their own, as pgx
// statements do not.
func HTTPTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if !Tracing() {
		return base
	}
	return otelhttp.NewTransport(base, otelhttp.WithFilter(func(r *http.Request) bool {
		return trace.SpanContextFromContext(r.Context()).IsValid()
	}))
}

// TracePool adds a span per statement to pools built from cfg when tracing
// is on. otelpgx traces only statements run under a recording span (a
// request's, a handler's): the background work of a process (the relay's
// polls, shard ownership checks) makes no traces.
func TracePool(cfg *pgxpool.Config) {
	if Tracing() {
		cfg.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithTrimSQLInSpanName())
	}
}

// kafkaTracing is the franz-go option tracing fetched records: each gets a
// receive span, child of the traceparent its producer set, and carries it
// in Record.Context for the code that handles it. Producing is not traced
// here: the records Concord produces are the relay's, and the relay makes a
// span of its own per record from the trace its outbox row stored.
func kafkaTracing() (kgo.Opt, bool) {
	if !Tracing() {
		return nil, false
	}
	return kgo.WithHooks(fetchTracing{kotel.NewTracer()}), true
}

// fetchTracing exposes only the fetch hooks of kotel's tracer.
type fetchTracing struct{ t *kotel.Tracer }

func (f fetchTracing) OnFetchRecordBuffered(r *kgo.Record) { f.t.OnFetchRecordBuffered(r) }
func (f fetchTracing) OnFetchRecordUnbuffered(r *kgo.Record, p bool) {
	f.t.OnFetchRecordUnbuffered(r, p)
}

// storedTrace is the W3C format a row stores a trace in, whatever the
// process's global propagator: like the outbox's traceparent header, it is
// part of the stored data, not a choice of the deployment.
var storedTrace propagation.TraceContext

// Traceparent is the W3C traceparent of ctx's span, "" when ctx has none
// (always, with tracing off). A row that later work is taken from (a
// payment the charger calls the provider for, a hold command) stores it,
// so that work continues the trace that asked for it (ContinueTrace).
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	storedTrace.Inject(ctx, c)
	return c["traceparent"]
}

// ContinueTrace is ctx for work taken from a row that stored traceparent:
// a span started under it is a child of the stored span, and links to
// ctx's own span (a poller's, a request's) when there is one. When ctx's
// span is of the stored trace already (the work arrived by a path that
// carried the trace), ctx stays the parent. An empty or malformed
// traceparent (a row written with tracing off) leaves ctx as it is.
func ContinueTrace(ctx context.Context, traceparent string) (context.Context, []trace.SpanStartOption) {
	if traceparent == "" {
		return ctx, nil
	}
	stored := trace.SpanContextFromContext(storedTrace.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent}))
	own := trace.SpanContextFromContext(ctx)
	if !stored.IsValid() || own.TraceID() == stored.TraceID() {
		return ctx, nil
	}
	var opts []trace.SpanStartOption
	if own.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: own}))
	}
	return trace.ContextWithRemoteSpanContext(ctx, stored), opts
}

type correlationKey struct{}

// WithCorrelationID returns ctx carrying the correlation id (the order or
// saga) of the work it is used for; log lines written with it say so.
func WithCorrelationID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, correlationKey{}, id)
}

// CorrelationID is the id WithCorrelationID put in ctx, or "".
func CorrelationID(ctx context.Context) string {
	id, _ := ctx.Value(correlationKey{}).(string)
	return id
}

// ContextHandler adds trace_id, span_id and correlation_id to every record
// logged with a context that carries them (slog's *Context methods), so the
// lines written while handling a request or an event find their trace.
type ContextHandler struct{ slog.Handler }

// Handle adds the context's ids and passes the record on.
func (h ContextHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	if id := CorrelationID(ctx); id != "" {
		r.AddAttrs(slog.String("correlation_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper around the derived handler.
func (h ContextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return ContextHandler{h.Handler.WithAttrs(as)}
}

// WithGroup keeps the wrapper around the derived handler.
func (h ContextHandler) WithGroup(name string) slog.Handler {
	return ContextHandler{h.Handler.WithGroup(name)}
}
