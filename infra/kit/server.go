package kit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyFunc reports whether the process can do its work now (its database
// and broker answer). /readyz answers 503 with the error otherwise.
type ReadyFunc func(ctx context.Context) error

// Timeouts of the ops server. They suit a JSON API and a /metrics scrape:
// no endpoint streams or long-polls, so a request that takes longer is a
// stuck or hostile client and is cut off rather than allowed to hold a
// connection and a goroutine.
const (
	// DefaultReadHeaderTimeout bounds reading the request line and headers
	// (slowloris).
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds reading the whole request, body included.
	DefaultReadTimeout = 30 * time.Second
	// DefaultWriteTimeout bounds the time from the end of the request
	// headers to the end of the response; a handler slower than this has
	// its connection closed.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout bounds how long a keep-alive connection waits for
	// its next request.
	DefaultIdleTimeout = 120 * time.Second
)

// OpsServer serves /metrics, /healthz and /readyz, plus whatever the binary
// mounts on Mux for operators (admin endpoints, /debug/pprof/). A binary
// with a public API serves it apart, on an APIServer (see NewAPIServer), so
// that the API can face clients while the ops listener stays where only
// operators and the scraper reach it. Both apply the Default*Timeout values
// above and refuse bodies larger than DefaultMaxBodyBytes with 413 (see
// LimitBody).
type OpsServer struct {
	Mux      *http.ServeMux
	Registry *prometheus.Registry
	srv      *http.Server
	ln       net.Listener
	metrics  *HTTPMetrics
}

// APIServer serves a binary's public API (orders, webhooks) on a listener
// of its own. It has nothing of the ops server's: no /metrics, /healthz,
// /readyz, /debug/pprof/ or admin endpoint answers on it.
type APIServer struct {
	Mux *http.ServeMux
	srv *http.Server
	ln  net.Listener
}

// NewOpsServer listens on addr (":0" picks a free port) and registers the
// process and Go collectors and concord_build_info. Every request it serves
// counts in concord_http_requests_total and
// concord_http_request_duration_seconds under the pattern of Mux (or of a
// ServeMux mounted on it) that matched. Checks run in order on /readyz.
func NewOpsServer(addr string, checks ...ReadyFunc) (*OpsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	RegisterBuildInfo(reg)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		for _, c := range checks {
			if err := c(ctx); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	metrics := NewHTTPMetrics(reg)
	return &OpsServer{Mux: mux, Registry: reg, ln: ln, srv: newHTTPServer(metrics, mux, "ops"), metrics: metrics}, nil
}

// NewAPIServer listens on addr for the binary's public API. Its requests
// count in the ops server's concord_http_* series (the API's routes are
// its own patterns, so the two listeners' series do not mix).
func (s *OpsServer) NewAPIServer(addr string) (*APIServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	return &APIServer{Mux: mux, ln: ln, srv: newHTTPServer(s.metrics, mux, "api")}, nil
}

// newHTTPServer is the server both listeners use: timed out, body-limited,
// counted and, when tracing is on, traced.
func newHTTPServer(m *HTTPMetrics, mux *http.ServeMux, listener string) *http.Server {
	return &http.Server{
		Handler:           traceHTTP(LimitBody(m.Wrap(mux), DefaultMaxBodyBytes), listener),
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
	}
}

// Addr is the address the server listens on.
func (s *OpsServer) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx is done, then shuts down, giving in-flight requests
// up to grace to finish.
func (s *OpsServer) Run(ctx context.Context, log *slog.Logger, grace time.Duration) error {
	return serve(ctx, log.With("listener", "ops"), grace, s.srv, s.ln)
}

// Addr is the address the server listens on.
func (s *APIServer) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx is done, then shuts down, giving in-flight requests
// up to grace to finish.
func (s *APIServer) Run(ctx context.Context, log *slog.Logger, grace time.Duration) error {
	return serve(ctx, log.With("listener", "api"), grace, s.srv, s.ln)
}

func serve(ctx context.Context, log *slog.Logger, grace time.Duration, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("http listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
