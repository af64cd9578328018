// Package wake is how a polling worker is told to look for work before its
// next poll: at once, when the work it takes was just committed, or later,
// when a retry it scheduled falls due. The payment charger, the hold
// worker and the shipper wait on one beside their poll ticker.
//
// A wake-up is a hint, never the only way work is found: the worker still
// polls, so a wake-up lost to a crash or coalesced with another delays the
// work by one poll interval at most.
package wake

import "time"

// Signal is a wake-up a worker selects on. Wake-ups sent while one is
// pending coalesce into it, so a burst of commits wakes the worker once.
// Use New; the zero value is not usable.
type Signal struct {
	c chan struct{}
}

// New returns a Signal with no wake-up pending.
func New() *Signal {
	return &Signal{c: make(chan struct{}, 1)}
}

// Now wakes the worker, or leaves the pending wake-up as it is. It never
// blocks.
func (s *Signal) Now() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// After wakes the worker once d has passed; at once when d <= 0.
func (s *Signal) After(d time.Duration) {
	time.AfterFunc(d, s.Now)
}

// At wakes the worker at t, when a retry it scheduled falls due; the zero
// time schedules nothing (a retry left to the poll or to an operator).
func (s *Signal) At(t time.Time) {
	if !t.IsZero() {
		s.After(time.Until(t))
	}
}

// C is the channel the worker receives wake-ups from.
func (s *Signal) C() <-chan struct{} {
	return s.c
}
