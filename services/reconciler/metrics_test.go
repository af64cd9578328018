package reconciler

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
