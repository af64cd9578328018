package testkit

import (
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/concordhq/concord/infra/kit"
)

var (
	spansOnce sync.Once
	spans     *tracetest.InMemoryExporter
)

// Spans installs, once for the test binary, a tracer provider that records
// every span as it ends (kit.InstallTracerProvider), and returns its
// exporter. Once, because a package's tracer follows the first provider
// installed: a second would record nothing. The tests of one binary share
// the exporter, so each picks its spans out by what only it made (an event
// id, a key).
func Spans() *tracetest.InMemoryExporter {
	spansOnce.Do(func() {
		spans = tracetest.NewInMemoryExporter()
		kit.InstallTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	})
	return spans
}

// SpanAttr is the value of span s's attribute key as text, "" when s has
// none.
func SpanAttr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}
