package fundingstore

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// reviews counts news sent to review where the store decides it, before
// the transaction commits: a transaction retried after a failed commit
// counts again, which an alert on any increase does not mind.
var reviews = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "concord_funding_review_total",
	Help: "Broker news funding-svc could not apply and sent to review (an unknown status, a record it cannot place).",
}, []string{"domain", "reason"})

// RegisterMetrics registers the funding store's counters on reg; a second
// registration on the same registry is a no-op.
func RegisterMetrics(reg prometheus.Registerer) error {
	err := reg.Register(reviews)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return nil
	}
	return err
}
