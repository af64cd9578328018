package console

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	pages   *prometheus.HistogramVec
	actions *prometheus.CounterVec
	logins  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		pages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "concord_console_page_seconds",
			Help:    "Time to answer a console page, by page and HTTP status.",
			Buckets: []float64{.01, .025, .05, .1, .2, .3, .5, 1, 2.5},
		}, []string{"page", "code"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_console_actions_total",
			Help: "Operator actions by action and outcome (done, refused, forbidden, csrf, unauthenticated).",
		}, []string{"action", "outcome"}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_console_logins_total",
			Help: "Login attempts by outcome (ok, refused).",
		}, []string{"outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.pages, m.actions, m.logins)
	}
	return m
}

func (m *metrics) observe(page string, code int, d time.Duration) {
	m.pages.WithLabelValues(page, strconv.Itoa(code)).Observe(d.Seconds())
}

func (m *metrics) action(action, outcome string) { m.actions.WithLabelValues(action, outcome).Inc() }

func (m *metrics) login(outcome string) { m.logins.WithLabelValues(outcome).Inc() }
