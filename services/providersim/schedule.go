package providersim

import (
	"slices"
	"time"
)

// schedule adds a transition the provider will make by itself at j.At.
// Jobs are part of the snapshot, so a restart does not forget them.
// Called with s.mu held.
func (s *Server) schedule(j job) {
	s.st.Jobs = append(s.st.Jobs, j)
	s.dirty = true
}

// runJobs applies every job due at now, oldest first. A job whose object
// moved on in the meantime (a processing payment that was forced to
// another status, a payment already fully refunded) does nothing.
// Called with s.mu held.
func (s *Server) runJobs(now time.Time) {
	if len(s.st.Jobs) == 0 {
		return
	}
	var due []job
	keep := s.st.Jobs[:0]
	for _, j := range s.st.Jobs {
		if now.Before(j.At) {
			keep = append(keep, j)
		} else {
			due = append(due, j)
		}
	}
	if len(due) == 0 {
		return
	}
	s.st.Jobs = slices.Clone(keep)
	s.dirty = true
	slices.SortStableFunc(due, func(a, b job) int { return a.At.Compare(b.At) })
	for _, j := range due {
		pi, ok := s.st.piByID[j.Object]
		if !ok {
			continue
		}
		switch j.Kind {
		case jobResolveProcessing:
			if pi.Status == StatusProcessing {
				s.succeed(nil, pi, now)
			}
		case jobLateReversal:
			if pi.Status == StatusSucceeded && pi.AmountRefunded < pi.received() {
				s.stats.LateReversals++
				s.refund(nil, pi, pi.received()-pi.AmountRefunded, "fraudulent",
					map[string]string{"provider_sim": "late_reversal"}, now)
			}
		case jobHoldExpiry:
			if pi.Status == StatusRequiresCapture {
				s.stats.HoldsExpired++
				s.expireHold(pi, now)
			}
		}
	}
}
