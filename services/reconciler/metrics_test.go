package reconciler

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestEveryMetricCarriesTheConcordPrefix(t *testing.T) {
	descs := make(chan *prometheus.Desc)
	go func() {
		NewMetrics(describer{descs})
		close(descs)
	}()
	n := 0
	for d := range descs {
		n++
		if s := d.String(); !strings.Contains(s, `fqName: "concord_reconciler_`) {
			t.Errorf("metric %s: want the concord_reconciler_ prefix", s)
		}
	}
	if n == 0 {
		t.Fatal("NewMetrics registered nothing")
	}
}

// The payments gauge (seed 000's N, whose growth is G) and the open findings
// by verdict follow each status read; both verdicts of a finding are
// exported at zero before any finding exists, so an alert on them has a
// series to read from the start.
func TestObserveStatusSetsPaymentsAndOpenFindingsByVerdict(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	for _, v := range []Verdict{Repairable, NeedsReview} {
		if got := testutil.ToFloat64(m.openByVerdict.WithLabelValues(string(v))); got != 0 {
			t.Errorf("open %s findings before any status: %v, want 0", v, got)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "concord_reconciler_open_findings_by_verdict"); err != nil || n != 2 {
		t.Errorf("open_findings_by_verdict series before any status: %d (%v), want 2", n, err)
	}
	m.ObserveStatus(Status{Payments: 1200, OpenByVerdict: map[Verdict]int{NeedsReview: 3}}, "payments")
	if got := testutil.ToFloat64(m.payments); got != 1200 {
		t.Errorf("payments gauge %v, want 1200", got)
	}
	if got := testutil.ToFloat64(m.openByVerdict.WithLabelValues(string(NeedsReview))); got != 3 {
		t.Errorf("open needs_review findings %v, want 3", got)
	}
	m.ObserveStatus(Status{Payments: 1300, OpenByVerdict: map[Verdict]int{Repairable: 1}}, "payments")
	if got := testutil.ToFloat64(m.openByVerdict.WithLabelValues(string(NeedsReview))); got != 0 {
		t.Errorf("open needs_review findings after all were resolved: %v, want 0", got)
	}
	if got := testutil.ToFloat64(m.openByVerdict.WithLabelValues(string(Repairable))); got != 1 {
		t.Errorf("open repairable findings %v, want 1", got)
	}
}

// describer is a Registerer that sends the descriptors of what is
// registered on it.
type describer struct{ out chan<- *prometheus.Desc }

func (d describer) Register(c prometheus.Collector) error {
	c.Describe(d.out)
	return nil
}

func (d describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		c.Describe(d.out)
	}
}

func (d describer) Unregister(prometheus.Collector) bool { return false }
