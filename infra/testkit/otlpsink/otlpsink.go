// Package otlpsink turns tracing on in a benchmark's process with an
// exporter that does all its work (spans made, batched, encoded and sent
// over OTLP/HTTP) to an in-process collector that discards what it gets:
// the cost of tracing without a backend's.
package otlpsink

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/concordhq/concord/infra/kit"
)

// Sink is the running collector and the tracer provider exporting to it.
type Sink struct {
	srv      *httptest.Server
	tp       *sdktrace.TracerProvider
	exports  atomic.Int64
	bytes    atomic.Int64
	ended    atomic.Int64
	exported atomic.Int64
}

// Start starts the collector and installs, as the process's global tracer
// provider (kit.InstallTracerProvider), one that batches spans to it as a
// service configured by OTEL_EXPORTER_OTLP_ENDPOINT would. Spans made
// before Start are not traced; the global provider stays installed, so
// run what is measured without tracing first.
func Start(ctx context.Context) (*Sink, error) {
	s := &Sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.srv.URL+"/v1/traces"))
	if err != nil {
		s.srv.Close()
		return nil, err
	}
	// The batcher as OTEL_BSP_* configures it (by default a queue of
	// 2048 spans that drops what does not fit), as in a service.
	s.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(counter{&s.ended}),
		sdktrace.WithBatcher(countingExporter{exp, &s.exported}))
	kit.InstallTracerProvider(s.tp)
	return s, nil
}

// Flush exports the spans still buffered.
func (s *Sink) Flush(ctx context.Context) error { return s.tp.ForceFlush(ctx) }

// Stats says what was exported: the spans ended, those exported (the
// rest the batcher dropped), and the requests and bytes the collector got.
func (s *Sink) Stats() Stats {
	return Stats{Ended: s.ended.Load(), Exported: s.exported.Load(), Requests: s.exports.Load(), Bytes: s.bytes.Load()}
}

// Stats are a Sink's counts.
type Stats struct{ Ended, Exported, Requests, Bytes int64 }

// String is the counts as a benchmark prints them.
func (st Stats) String() string {
	return fmt.Sprintf("%d of %d spans exported in %d requests, %.1f MiB", st.Exported, st.Ended, st.Requests, float64(st.Bytes)/(1<<20))
}

// counter counts the spans ended.
type counter struct{ n *atomic.Int64 }

func (c counter) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (c counter) OnEnd(sdktrace.ReadOnlySpan)                     { c.n.Add(1) }
func (c counter) Shutdown(context.Context) error                  { return nil }
func (c counter) ForceFlush(context.Context) error                { return nil }

// countingExporter counts the spans the batcher hands its exporter.
type countingExporter struct {
	sdktrace.SpanExporter
	n *atomic.Int64
}

func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.n.Add(int64(len(spans)))
	return e.SpanExporter.ExportSpans(ctx, spans)
}

// Close flushes and stops the provider, then the collector.
func (s *Sink) Close(ctx context.Context) error {
	err := s.tp.Shutdown(ctx)
	s.srv.Close()
	return err
}
