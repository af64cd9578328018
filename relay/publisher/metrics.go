package publisher

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the relay's Prometheus series. Backlog gauges describe the
// whole outbox (every instance reports the same numbers); counters and the
// latency histogram are this instance's.
type metrics struct {
	backlog     prometheus.Gauge
	oldestAge   prometheus.Gauge
	parked      prometheus.Gauge
	published   *prometheus.CounterVec
	failures    *prometheus.CounterVec
	parkedTotal prometheus.Counter
	overtaken   prometheus.Counter
	latency     prometheus.Histogram
	batch       prometheus.Histogram
	reads       *prometheus.CounterVec
	ownedShards prometheus.Gauge
	members     prometheus.Gauge
	cleaned     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_outbox_backlog_rows",
			Help: "Outbox rows not yet published or skipped (parked rows included)."}),
		oldestAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_outbox_oldest_pending_age_seconds",
			Help: "Age of the oldest pending outbox row; 0 when the outbox is drained."}),
		parked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_outbox_parked_rows",
			Help: "Parked outbox rows waiting for `relay outbox retry|skip`; their keys wait behind them."}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_relay_published_total",
			Help: "Rows acknowledged by Kafka and marked published by this instance."}, []string{"topic"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_relay_failures_total",
			Help: "Rows whose record failed (kind: refused by the cluster, or transient)."}, []string{"topic", "kind"}),
		parkedTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_relay_parked_total",
			Help: "Rows this instance parked after their attempts ran out."}),
		overtaken: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_relay_overtaken_total",
			Help: "Records acknowledged after an earlier record of their key failed in the same batch (never marked; should stay 0)."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_relay_commit_to_ack_seconds",
			Help:    "From the row's insert (in the business transaction) to Kafka's acknowledgement.",
			Buckets: []float64{.002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "concord_relay_batch_seconds",
			Help:    "One batch: select and lock, produce, wait for every ack, mark, commit.",
			Buckets: prometheus.ExponentialBuckets(.001, 2.5, 12)}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_relay_outbox_reads_total",
			Help: "Batch reads of the outbox by result: rows (some due), empty (woken or polled for nothing) or timeout (cancelled after the read timeout; the statistics are refreshed)."}, []string{"result"}),
		ownedShards: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_relay_owned_shards",
			Help: "Shards this instance owns."}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{Name: "concord_relay_members",
			Help: "Relay instances this instance sees on the outbox."}),
		cleaned: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_outbox_cleaned_rows_total",
			Help: "Published rows deleted after the retention."}),
	}
	if reg != nil {
		reg.MustRegister(m.backlog, m.oldestAge, m.parked, m.published, m.failures, m.parkedTotal, m.overtaken,
			m.latency, m.batch, m.reads, m.ownedShards, m.members, m.cleaned)
	}
	return m
}
