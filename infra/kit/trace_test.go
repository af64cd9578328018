package kit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/testkit"
)

// Tracing is on only when the OTEL_* variables ask for an exporter.
func TestTracingConfiguredOnlyByOTELVariables(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
	} {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
			t.Setenv(k, c.env[k])
		}
		if got := kit.TracingConfigured(); got != c.want {
			t.Errorf("TracingConfigured() with %v = %v, want %v", c.env, got, c.want)
		}
	}
}

// Unconfigured, StartTracing leaves the process's tracer provider alone.
func TestStartTracingUnconfiguredInstallsNothing(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"} {
		t.Setenv(k, "")
	}
	before := otel.GetTracerProvider()
	stop, err := kit.StartTracing(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != before {
		t.Fatal("StartTracing installed a tracer provider without OTEL_* configuration")
	}
}

// Lines logged with a context carry its span's ids and its correlation id;
// lines logged without one carry none.
func TestLogLinesCarryTheContextsTraceAndCorrelation(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(kit.ContextHandler{Handler: slog.NewJSONHandler(&buf, nil)}).With("service", "test")
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	ctx = kit.WithCorrelationID(ctx, "order-1")
	log.WithGroup("g").InfoContext(ctx, "with")
	log.Info("without")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var with, without map[string]any
	if err := json.Unmarshal(lines[0], &with); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(lines[1], &without); err != nil {
		t.Fatal(err)
	}
	g, _ := with["g"].(map[string]any)
	if g["trace_id"] != tid.String() || g["span_id"] != sid.String() || g["correlation_id"] != "order-1" {
		t.Errorf("line logged with the context: %v", with)
	}
	for _, k := range []string{"trace_id", "span_id", "correlation_id"} {
		if _, ok := without[k]; ok {
			t.Errorf("line logged without a context has %s: %v", k, without)
		}
	}
}

// With tracing on, a pool's statements are spans under the caller's span,
// and statements run outside any span make none.
func TestPoolStatementsAreSpansUnderTheCallersSpan(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	kit.InstallTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
	pool, err := kit.NewPool(context.Background(), testkit.NewDatabase(t, testkit.PostgresURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	if _, err := pool.Exec(context.Background(), "select 1"); err != nil {
		t.Fatal(err)
	}
	if n := len(spans.GetSpans()); n != 0 {
		t.Fatalf("%d spans for a statement outside any span, want none", n)
	}
	ctx, parent := otel.Tracer("test").Start(context.Background(), "handler")
	if _, err := pool.Exec(ctx, "select 2"); err != nil {
		t.Fatal(err)
	}
	parent.End()
	for _, s := range spans.GetSpans() {
		if s.Parent.SpanID() == parent.SpanContext().SpanID() {
			return
		}
	}
	t.Fatalf("no span under the caller's among %d", len(spans.GetSpans()))
}

// With tracing on, a request to a kit server is a span, child of the
// caller's span whose context the kit HTTP transport sent.
func TestHTTPServerAndClientJoinTheCallersTrace(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	kit.InstallTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	ops, err := kit.NewOpsServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ops.Mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		if !trace.SpanContextFromContext(r.Context()).IsValid() {
			http.Error(w, "no span", http.StatusInternalServerError)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ops.Run(ctx, discardLogger(), time.Second) }()
	t.Cleanup(func() { cancel(); <-done })

	// Outside any span, the client records nothing of its own.
	untraced, _ := http.NewRequest(http.MethodGet, "http://"+ops.Addr()+"/hello", nil)
	resp, err := (&http.Client{Transport: kit.HTTPTransport(nil)}).Do(untraced)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, s := range spans.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			t.Fatalf("client span %q for a request made outside any span", s.Name)
		}
	}

	callCtx, call := otel.Tracer("test").Start(context.Background(), "caller")
	req, _ := http.NewRequestWithContext(callCtx, http.MethodGet, "http://"+ops.Addr()+"/hello", nil)
	resp, err = (&http.Client{Transport: kit.HTTPTransport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	call.End()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /hello: %s", resp.Status)
	}
	// The server ends its span after the response went out.
	testkit.Eventually(t, 10*time.Second, "the server span in the caller's trace", func() error {
		for _, s := range spans.GetSpans() {
			if s.SpanKind == trace.SpanKindServer && s.Name == "GET /hello" && s.SpanContext.TraceID() == call.SpanContext().TraceID() {
				return nil
			}
		}
		return fmt.Errorf("not among %d spans", len(spans.GetSpans()))
	})
}

// A stored traceparent round-trips, and work continued from it is its
// child, linked to the span it ran under when that was of another trace.
func TestContinueTraceMakesTheStoredSpanTheParent(t *testing.T) {
	sc := func(traceID, spanID byte) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{traceID}, SpanID: trace.SpanID{spanID}, TraceFlags: trace.FlagsSampled})
	}
	stored := kit.Traceparent(trace.ContextWithSpanContext(context.Background(), sc(1, 1)))
	if want := "00-01000000000000000000000000000000-0100000000000000-01"; stored != want {
		t.Fatalf("Traceparent = %q, want %q", stored, want)
	}
	if got := kit.Traceparent(context.Background()); got != "" {
		t.Fatalf("Traceparent without a span = %q, want empty", got)
	}
	for _, c := range []struct {
		name        string
		own         trace.SpanContext
		traceparent string
		parent      trace.SpanContext
		link        bool
	}{
		{"nothing stored, no span", trace.SpanContext{}, "", trace.SpanContext{}, false},
		{"nothing stored keeps the own span", sc(2, 2), "", sc(2, 2), false},
		{"malformed keeps the own span", sc(2, 2), "00-zz-01", sc(2, 2), false},
		{"stored, no own span", trace.SpanContext{}, stored, sc(1, 1).WithRemote(true), false},
		{"stored, own span of another trace: linked", sc(2, 2), stored, sc(1, 1).WithRemote(true), true},
		{"own span of the stored trace stays the parent", sc(1, 3), stored, sc(1, 3), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.own.IsValid() {
				ctx = trace.ContextWithSpanContext(ctx, c.own)
			}
			got, opts := kit.ContinueTrace(ctx, c.traceparent)
			if p := trace.SpanContextFromContext(got); !p.Equal(c.parent) {
				t.Errorf("parent = %v, want %v", p, c.parent)
			}
			cfg := trace.NewSpanStartConfig(opts...)
			links := cfg.Links()
			if c.link != (len(links) == 1 && links[0].SpanContext.Equal(c.own)) || (!c.link && len(links) > 0) {
				t.Errorf("links = %v, want a link to the own span: %v", links, c.link)
			}
		})
	}
}
