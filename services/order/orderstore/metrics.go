package orderstore

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/services/order"
)

// transitions counts status changes where they are decided. They are
// counted once the batch that makes them is written, before its
// transaction commits: a batch that fails to commit and is retried counts
// again, which a rate over minutes does not notice.
var transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "concord_order_status_transitions_total",
	Help: "Orders moved from one status to another (from=\"none\" for a new order).",
}, []string{"from", "to"})

// RegisterMetrics registers the order store's counters on reg; a second
// registration on the same registry is a no-op.
func RegisterMetrics(reg prometheus.Registerer) error {
	err := reg.Register(transitions)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return nil
	}
	return err
}

type move struct{ from, to order.Status }

func countMoves(moves []move) {
	for _, m := range moves {
		from := string(m.from)
		if from == "" {
			from = "none"
		}
		transitions.WithLabelValues(from, string(m.to)).Inc()
	}
}
