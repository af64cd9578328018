package kit

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"
)

// HTTPMetrics counts and times the requests of one handler tree by route.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewHTTPMetrics registers concord_http_requests_total{route,code,method}
// and concord_http_request_duration_seconds{route,method} on reg. A second
// call on the same registry shares the first one's series.
func NewHTTPMetrics(reg prometheus.Registerer) *HTTPMetrics {
	return &HTTPMetrics{
		requests: registerShared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_http_requests_total",
			Help: "HTTP requests served, by route (the ServeMux pattern that matched, \"unmatched\" for none), status code and method.",
		}, []string{"route", "code", "method"})),
		duration: registerShared(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "concord_http_request_duration_seconds",
			Help:    "Time from the request's headers to the end of the handler, by route and method.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "method"})),
	}
}

// Wrap instruments next, which must be (or lead straight to) a ServeMux:
// the route is read from Request.Pattern after the mux has matched, so a
// path carrying ids counts under its pattern and the series stay few.
func (m *HTTPMetrics) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := RouteOf(r.Pattern)
		method := methodLabel(r.Method)
		m.requests.WithLabelValues(route, strconv.Itoa(sw.code()), method).Inc()
		m.duration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
	})
}

// RouteOf is the route label of a ServeMux pattern: its path part (the
// method is a label of its own), "unmatched" when no pattern matched.
func RouteOf(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = strings.TrimLeft(pattern[i+1:], " \t")
	}
	return pattern
}

// methodLabel keeps the label set bounded: a client can send any method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// KafkaMetrics is the franz-go option that exports a client's metrics
// through kprom as concord_<subsystem>_kafka_…; labels tell apart clients
// of one process that share the subsystem (a consumer's group). A nil reg
// exports nothing.
func KafkaMetrics(reg prometheus.Registerer, subsystem string, labels prometheus.Labels) kgo.Opt {
	if reg == nil {
		return kgo.WithHooks()
	}
	opts := []kprom.Opt{kprom.Registerer(&kafkaRegisterer{Registerer: reg, own: map[prometheus.Collector]bool{}}), kprom.Subsystem(subsystem + "_kafka")}
	if len(labels) > 0 {
		opts = append(opts, kprom.WithStaticLabel(labels))
	}
	return kgo.WithHooks(kprom.NewMetrics("concord", opts...))
}

// kafkaRegisterer adapts kprom's registrations to the project's rules:
// kprom names two gauges …_records_total, which promlint rejects (only
// counters end in _total), so they are left out; and a client whose series
// are already registered (a second client with the same subsystem and
// labels) does not take the process down, nor, when it closes, remove the
// series of the client that registered them.
type kafkaRegisterer struct {
	prometheus.Registerer
	mu  sync.Mutex
	own map[prometheus.Collector]bool
}

func (k *kafkaRegisterer) Register(c prometheus.Collector) error {
	if gaugeNamedTotal(c) {
		return nil
	}
	err := k.Registerer.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return nil
	}
	if err == nil {
		k.mu.Lock()
		k.own[c] = true
		k.mu.Unlock()
	}
	return err
}

func (k *kafkaRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := k.Register(c); err != nil {
			panic(err)
		}
	}
}

func (k *kafkaRegisterer) Unregister(c prometheus.Collector) bool {
	k.mu.Lock()
	mine := k.own[c]
	delete(k.own, c)
	k.mu.Unlock()
	return mine && k.Registerer.Unregister(c)
}

func gaugeNamedTotal(c prometheus.Collector) bool {
	ch := make(chan *prometheus.Desc, 4)
	go func() { c.Describe(ch); close(ch) }()
	found := false
	for d := range ch {
		s := d.String()
		found = found || strings.Contains(s, `buffered_produce_records_total"`) || strings.Contains(s, `buffered_fetch_records_total"`)
	}
	return found
}

// PoolCollector exports pgxpool.Stat() of one pool as concord_db_pool_…
// series labelled pool=<name>.
type PoolCollector struct {
	pool  *pgxpool.Pool
	descs []poolDesc
}

// RegisterPool registers the statistics of pool under the label
// pool=name; a nil reg registers nothing.
func RegisterPool(reg prometheus.Registerer, name string, pool *pgxpool.Pool) error {
	if reg == nil {
		return nil
	}
	return reg.Register(NewPoolCollector(name, pool))
}

// NewPoolCollector exports the statistics of pool under the label pool=name.
func NewPoolCollector(name string, pool *pgxpool.Pool) *PoolCollector {
	labels := prometheus.Labels{"pool": name}
	d := func(metric, help string, kind prometheus.ValueType, v func(*pgxpool.Stat) float64) poolDesc {
		return poolDesc{desc: prometheus.NewDesc("concord_db_pool_"+metric, help, nil, labels), kind: kind, value: v}
	}
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	return &PoolCollector{pool: pool, descs: []poolDesc{
		d("acquired_connections", "Connections currently acquired from the pool.", g, func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) }),
		d("idle_connections", "Idle connections in the pool.", g, func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) }),
		d("constructing_connections", "Connections being established.", g, func(s *pgxpool.Stat) float64 { return float64(s.ConstructingConns()) }),
		d("connections", "Connections in the pool: acquired, idle and being established.", g, func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) }),
		d("max_connections", "Most connections the pool may hold.", g, func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) }),
		d("acquires_total", "Connections acquired from the pool.", c, func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) }),
		d("acquire_wait_seconds_total", "Time spent acquiring connections, summed.", c, func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() }),
		d("empty_acquires_total", "Acquires that waited because no idle connection was free.", c, func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) }),
		d("canceled_acquires_total", "Acquires canceled by their context.", c, func(s *pgxpool.Stat) float64 { return float64(s.CanceledAcquireCount()) }),
		d("new_connections_total", "Connections opened.", c, func(s *pgxpool.Stat) float64 { return float64(s.NewConnsCount()) }),
		d("max_lifetime_destroys_total", "Connections closed for reaching their maximum lifetime.", c, func(s *pgxpool.Stat) float64 { return float64(s.MaxLifetimeDestroyCount()) }),
		d("max_idle_destroys_total", "Connections closed for idling too long.", c, func(s *pgxpool.Stat) float64 { return float64(s.MaxIdleDestroyCount()) }),
	}}
}

type poolDesc struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*pgxpool.Stat) float64
}

// Describe implements prometheus.Collector.
func (p *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range p.descs {
		ch <- d.desc
	}
}

// Collect implements prometheus.Collector.
func (p *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := p.pool.Stat()
	for _, d := range p.descs {
		ch <- prometheus.MustNewConstMetric(d.desc, d.kind, d.value(s))
	}
}

// registerShared registers c, or returns the collector already registered
// under its name.
func registerShared[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}
