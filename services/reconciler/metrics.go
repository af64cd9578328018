package reconciler

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the reconciler's Prometheus series. A nil *Metrics records
// nothing, so tests and one-shot commands need not build one.
type Metrics struct {
	lag             prometheus.Gauge
	payments        prometheus.Gauge
	cycleDuration   prometheus.Histogram
	lastCycle       prometheus.Gauge
	sinceLastCycle  prometheus.Gauge
	currentCycleAge prometheus.Gauge
	verdicts        *prometheus.CounterVec
	openFindings    *prometheus.GaugeVec
	openByVerdict   *prometheus.GaugeVec
	findingsOpened  *prometheus.CounterVec
	commandsEmitted *prometheus.CounterVec
	providerCalls   *prometheus.CounterVec
	concurrentRuns  prometheus.Counter
	unknownRecords  prometheus.Counter
	rowsVerified    prometheus.Counter

	mu               sync.Mutex // guards openFindingKinds
	openFindingKinds map[Kind]bool
}

// NewMetrics registers the reconciler's series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_reconciler_lag_seconds",
			Help: "Reconciliation lag: the longest time any payment has gone without being verified against the provider (under reconciler broker run: a bound on the time any funding movement has gone without a visit of the scan)."}),
		payments: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_reconciler_payments",
			Help: "Payments the reconciler must verify (rows in payments); its growth per hour is seed 000's G, which the rows verified per hour (B×R) must exceed."}),
		cycleDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_reconciler_cycle_duration_seconds",
			Help:    "Time this process took to complete a full cycle over every payment.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16)}),
		lastCycle: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_reconciler_last_cycle_completed_timestamp_seconds",
			Help: "Unix time the last full cycle completed (any reconciler)."}),
		sinceLastCycle: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_reconciler_seconds_since_last_cycle",
			Help: "Seconds since the last full cycle completed (any reconciler)."}),
		currentCycleAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_reconciler_current_cycle_age_seconds",
			Help: "Seconds since the cycle in progress started."}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_reconciler_verdicts_total",
			Help: "Rows classified, by verdict."}, []string{"verdict"}),
		openFindings: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "concord_reconciler_open_findings",
			Help: "Unresolved findings, by kind."}, []string{"kind"}),
		openByVerdict: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "concord_reconciler_open_findings_by_verdict",
			Help: "Unresolved findings, by verdict: repairable ones wait for payment-svc to apply their command, needs_review ones for a person."}, []string{"verdict"}),
		findingsOpened: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_reconciler_findings_opened_total",
			Help: "Findings recorded, by kind (an already-open finding is not counted again)."}, []string{"kind"}),
		commandsEmitted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_reconciler_repair_commands_total",
			Help: "Repair commands appended to the outbox, by command."}, []string{"command"}),
		providerCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_reconciler_provider_calls_total",
			Help: "Provider API calls, by operation and outcome."}, []string{"op", "outcome"}),
		concurrentRuns: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_reconciler_concurrent_runs_total",
			Help: "Batches discarded because another reconciler advanced the cursor first."}),
		unknownRecords: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_reconciler_heal_unknown_records_total",
			Help: "Records heal found at the provider or the broker that have no local row (payments, funding movements)."}),
		rowsVerified: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_reconciler_rows_verified_total",
			Help: "Rows compared with the provider's answer (calls/verified is the cost per row)."}),
		openFindingKinds: make(map[Kind]bool),
	}
	for _, v := range Verdicts {
		m.verdicts.WithLabelValues(string(v))
	}
	for _, v := range findingVerdicts {
		m.openByVerdict.WithLabelValues(string(v))
	}
	reg.MustRegister(m.lag, m.payments, m.openByVerdict, m.cycleDuration, m.lastCycle, m.sinceLastCycle, m.currentCycleAge, m.verdicts,
		m.openFindings, m.findingsOpened, m.commandsEmitted, m.providerCalls, m.concurrentRuns,
		m.unknownRecords, m.rowsVerified)
	return m
}

func (m *Metrics) verdict(v Verdict, n int) {
	if m != nil && n > 0 {
		m.verdicts.WithLabelValues(string(v)).Add(float64(n))
	}
}

func (m *Metrics) call(op, outcome string) {
	if m != nil {
		m.providerCalls.WithLabelValues(op, outcome).Inc()
	}
}

// ObserveCall counts one call to the provider or broker by operation and
// outcome (an adapter that makes its own calls reports them here).
func (m *Metrics) ObserveCall(op, outcome string) { m.call(op, outcome) }

func (m *Metrics) recorded(s RecordStats) {
	if m == nil {
		return
	}
	for k, n := range s.ByKind {
		m.findingsOpened.WithLabelValues(string(k)).Add(float64(n))
	}
	for c, n := range s.Commands {
		m.commandsEmitted.WithLabelValues(string(c)).Add(float64(n))
	}
	m.rowsVerified.Add(float64(s.Verified))
}

func (m *Metrics) concurrent() {
	if m != nil {
		m.concurrentRuns.Inc()
	}
}

func (m *Metrics) cycle(d time.Duration) {
	if m != nil {
		m.cycleDuration.Observe(d.Seconds())
	}
}

func (m *Metrics) unknownRecord(n int) {
	if m != nil {
		m.unknownRecords.Add(float64(n))
	}
}

// findingVerdicts are the verdicts a finding can have.
var findingVerdicts = []Verdict{Repairable, NeedsReview}

// Status is what `reconciler status` prints and the metrics export.
type Status struct {
	Now           time.Time
	Payments      int64
	Lag           time.Duration // the oldest time since a row was last verified
	Cursors       []CursorStatus
	OpenFindings  map[Kind]int
	OpenByVerdict map[Verdict]int // the same findings by verdict
}

// CursorStatus is one job's position in its cycle.
type CursorStatus struct {
	Job                  string
	LastID               int64
	CycleStartedAt       time.Time
	LastCycleCompletedAt *time.Time
	LastCycleDuration    *time.Duration
	CyclesCompleted      int64
}

// ObserveStatus sets the gauges from a status read.
func (m *Metrics) ObserveStatus(s Status, job string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lag.Set(s.Lag.Seconds())
	m.payments.Set(float64(s.Payments))
	for _, v := range findingVerdicts {
		m.openByVerdict.WithLabelValues(string(v)).Set(float64(s.OpenByVerdict[v]))
	}
	for _, c := range s.Cursors {
		if c.Job != job {
			continue
		}
		m.currentCycleAge.Set(s.Now.Sub(c.CycleStartedAt).Seconds())
		if c.LastCycleCompletedAt != nil {
			m.lastCycle.Set(float64(c.LastCycleCompletedAt.UnixNano()) / 1e9)
			m.sinceLastCycle.Set(s.Now.Sub(*c.LastCycleCompletedAt).Seconds())
		}
	}
	// Kinds that were open before and are not now must drop to zero, not
	// keep their last value.
	for k := range m.openFindingKinds {
		if _, ok := s.OpenFindings[k]; !ok {
			m.openFindings.WithLabelValues(string(k)).Set(0)
		}
	}
	for k, n := range s.OpenFindings {
		m.openFindingKinds[k] = true
		m.openFindings.WithLabelValues(string(k)).Set(float64(n))
	}
}
