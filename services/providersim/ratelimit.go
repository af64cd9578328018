package providersim

import (
	"math"

	"golang.org/x/time/rate"
)

// limit applies the per-API-key token bucket (Config.RateLimit requests per
// second, burst equal to the rate), measured on the simulator's Clock. A
// refused request is answered with Stripe's 429 rate_limit error and has no
// effect.
func (s *Server) limit(apiKey string) *apiError {
	if s.cfg.RateLimit <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.limiters[apiKey]
	if !ok {
		burst := max(1, int(math.Ceil(s.cfg.RateLimit)))
		l = rate.NewLimiter(rate.Limit(s.cfg.RateLimit), burst)
		s.limiters[apiKey] = l
	}
	if l.AllowN(s.clock.Now(), 1) {
		return nil
	}
	s.stats.RateLimited++
	return rateLimitError()
}

func rateLimitError() *apiError {
	return &apiError{Status: 429, Type: errTypeInvalidRequest, Code: "rate_limit",
		Message: "Too many requests hit the API too quickly. We recommend an exponential backoff of your requests."}
}
