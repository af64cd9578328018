package orchestratorstore

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/services/orchestrator"
)

// Reasons a reply or request is rejected (the "reason" label of
// concord_saga_inputs_rejected_total and saga_rejected_inputs.reason).
// wrong_version is the one the runner dead-letters (no handler reads the
// version).
const (
	RejectUnknownSaga     = "unknown_saga"     // no such saga in this database
	RejectUnknownStep     = "unknown_step"     // the saga's definition has no such step
	RejectCommandMismatch = "command_mismatch" // the command type or key is not the step's
	RejectWrongVersion    = "wrong_version"    // a version of the event this orchestrator cannot read
	RejectBadRequest      = "bad_request"      // a checkout request the saga cannot run (no address, no amount)
)

// AbsorbedDuplicateStart is the "reason" label of a checkout request for a
// saga that exists already.
const AbsorbedDuplicateStart = "duplicate_start"

// Metrics are the orchestrator's Prometheus series. A nil *Metrics counts
// nothing.
type Metrics struct {
	startedC  *prometheus.CounterVec // saga
	finishedC *prometheus.CounterVec // saga, status
	failedC   *prometheus.CounterVec // saga
	commands  *prometheus.CounterVec // step, kind
	timeouts  *prometheus.CounterVec // step
	absorbedC *prometheus.CounterVec // reason
	rejectedC *prometheus.CounterVec // reason
	stuckG    prometheus.Gauge
	alerts    *prometheus.CounterVec // outcome
	openG     prometheus.Gauge
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		startedC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_saga_started_total",
			Help: "Sagas started, by saga definition."}, []string{"saga"}),
		finishedC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_saga_finished_total",
			Help: "Sagas that reached a terminal status (COMPLETED, COMPENSATED, FAILED)."}, []string{"saga", "status"}),
		failedC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_saga_failed_total",
			Help: "Sagas that ended FAILED: a compensation exhausted its attempts and an operator must review the saga (saga_reviews)."}, []string{"saga"}),
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_saga_commands_total",
			Help: "Commands sent, by step and kind (execute, compensate); retries included."}, []string{"step", "kind"}),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_saga_step_timeouts_total",
			Help: "Commands whose reply did not come within the step's timeout."}, []string{"step"}),
		absorbedC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_saga_inputs_absorbed_total",
			Help: "Replies and requests that changed nothing: duplicate, late, out_of_order, terminal, duplicate_start, not_due."}, []string{"reason"}),
		rejectedC: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_saga_inputs_rejected_total",
			Help: "Replies and requests refused: unknown_saga, unknown_step, command_mismatch, bad_request (recorded in saga_rejected_inputs), wrong_version (dead-lettered)."}, []string{"reason"}),
		stuckG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_saga_stuck",
			Help: "Non-terminal sagas that have not moved for longer than --stuck-after."}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_saga_alerts_total",
			Help: "Alerts of FAILED sagas, by outcome (sent, logged: no webhook configured, failed: the webhook will be retried)."}, []string{"outcome"}),
		openG: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_saga_reviews_open",
			Help: "Review entries of FAILED sagas no operator has resolved yet."}),
	}
	if reg != nil {
		reg.MustRegister(m.startedC, m.finishedC, m.failedC, m.commands, m.timeouts, m.absorbedC, m.rejectedC, m.stuckG, m.alerts, m.openG)
	}
	return m
}

func (m *Metrics) started(saga string) {
	if m != nil {
		m.startedC.WithLabelValues(saga).Inc()
	}
}

func (m *Metrics) finished(saga string, s orchestrator.Status) {
	if m == nil {
		return
	}
	m.finishedC.WithLabelValues(saga, string(s)).Inc()
	if s == orchestrator.StatusFailed {
		m.failedC.WithLabelValues(saga).Inc()
	}
}

func (m *Metrics) command(c orchestrator.Command) {
	if m != nil {
		m.commands.WithLabelValues(c.Step, string(c.Kind)).Inc()
	}
}

func (m *Metrics) timedOut(step string) {
	if m != nil {
		m.timeouts.WithLabelValues(step).Inc()
	}
}

func (m *Metrics) absorbed(reason string) {
	if m != nil {
		m.absorbedC.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) rejected(reason string) {
	if m != nil {
		m.rejectedC.WithLabelValues(reason).Inc()
	}
}

// Rejected counts an input dead-lettered for reason outside the store
// (the consumer's version check).
func (m *Metrics) Rejected(reason string) { m.rejected(reason) }

func (m *Metrics) stuck(n int) {
	if m != nil {
		m.stuckG.Set(float64(n))
	}
}

func (m *Metrics) alerted(outcome string) {
	if m != nil {
		m.alerts.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) open(n int) {
	if m != nil {
		m.openG.Set(float64(n))
	}
}
