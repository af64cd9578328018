package inventorystore

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// reservations counts what the store did with each reservation request
// and each commit or release. Counted once the batch is written, before
// its transaction commits: a batch retried after a failed commit counts
// again.
var reservations = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "concord_inventory_reservations_total",
	Help: "Reservation decisions by outcome: held, rejected (out of stock), duplicate (a repeated request), committed, released.",
}, []string{"outcome"})

// RegisterMetrics registers the inventory store's counters on reg; a
// second registration on the same registry is a no-op.
func RegisterMetrics(reg prometheus.Registerer) error {
	err := reg.Register(reservations)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return nil
	}
	return err
}

func countOutcomes(outcomes []string) {
	for _, o := range outcomes {
		reservations.WithLabelValues(o).Inc()
	}
}
