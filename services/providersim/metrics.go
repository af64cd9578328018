package providersim

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

func newCallsCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_provider_sim_api_calls_total",
		Help: "API calls answered, by endpoint (the route pattern) and outcome: ok, declined (402), " +
			"client_error (other 4xx), rate_limited (429), server_error (5xx), injected_rate_limit, injected_server_error, hung.",
	}, []string{"endpoint", "outcome"})
}

// Metrics is the collector of the API call counter, for the binary to
// register on its /metrics registry.
func (s *Server) Metrics() prometheus.Collector { return s.calls }

// callOutcome names what an answer was; an injected fault wins over the
// status it was answered with.
func callOutcome(status int, injected string) string {
	switch {
	case injected != "":
		return injected
	case status < 400:
		return "ok"
	case status == http.StatusPaymentRequired:
		return "declined"
	case status == http.StatusTooManyRequests:
		return "rate_limited"
	case status < 500:
		return "client_error"
	default:
		return "server_error"
	}
}
