package idempotent

import (
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of one record, the "outcome" label of concord_consumer_events_total.
const (
	OutcomeApplied      = "applied"       // new: recorded and handled
	OutcomeDuplicate    = "duplicate"     // seen before: skipped
	OutcomeDeadLettered = "dead_lettered" // permanent failure: sent to the DLQ
	OutcomeIgnored      = "ignored"       // a type the group does not act on (Config.Types)
)

type metrics struct {
	events   *prometheus.CounterVec   // group, topic, outcome
	retries  *prometheus.CounterVec   // group, topic
	latency  *prometheus.HistogramVec // group
	lag      *prometheus.GaugeVec     // group, topic, partition
	buffered *prometheus.GaugeVec     // group
	purged   *prometheus.CounterVec   // group
	applied  atomic.Int64
	dupes    atomic.Int64
	dead     atomic.Int64
	ignored  atomic.Int64
	retried  atomic.Int64
	purgedN  atomic.Int64
	batchesN atomic.Int64
}

func newMetrics(reg prometheus.Registerer) *metrics {
	return &metrics{
		events: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_consumer_events_total",
			Help: "Records handled by idempotent consumers, by outcome (applied, duplicate, dead_lettered).",
		}, []string{"group", "topic", "outcome"})),
		retries: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_consumer_batch_retries_total",
			Help: "Batches rolled back by a transient failure and retried.",
		}, []string{"group", "topic"})),
		latency: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "concord_consumer_batch_duration_seconds",
			Help:    "Time to apply one partition batch: decode, transaction, DLQ produce, commit.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"group"})),
		lag: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "concord_consumer_lag",
			Help: "Records between the partition's high watermark and the next record to apply.",
		}, []string{"group", "topic", "partition"})),
		buffered: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "concord_consumer_buffered_bytes",
			Help: "Bytes of polled records not yet applied, bounded by MaxBufferedBytes.",
		}, []string{"group"})),
		purged: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_consumer_processed_events_purged_total",
			Help: "processed_events rows deleted by the retention purge.",
		}, []string{"group"})),
	}
}

// register registers c, or returns the collector already registered under
// the same description, so several runners can share one registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
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

func partLabel(p int32) string { return strconv.Itoa(int(p)) }

// Stats are the runner's counters since it was created.
type Stats struct {
	Applied      int64 // events recorded and handled
	Duplicates   int64 // redeliveries skipped by dedupe
	DeadLettered int64 // records sent to the dead-letter topic
	Ignored      int64 // records of types the handler does not act on
	Retries      int64 // batches retried after a transient failure
	Purged       int64 // processed_events rows purged
	Batches      int64 // batches committed

	BufferedBytes     int64 // polled records held now, as Config.MaxBufferedBytes counts them
	PeakBufferedBytes int64 // the most BufferedBytes ever was
}
