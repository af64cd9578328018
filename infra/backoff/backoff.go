// Package backoff computes how long to wait before retrying something that
// failed: exponential from a first wait, capped, optionally spread by
// jitter. It is the one place Concord's retry loops (the relay, the
// idempotent consumers, the payment charger, provider-sim's webhooks) take
// their waits from.
//
// A wait that only depends on the failure count (Exponential) suits rows
// whose next attempt is stored (next_attempt_at) and simulators that must
// be reproducible; EqualJitter suits many workers that fail together (say,
// every partition when the database restarts), so their retries do not
// arrive in lockstep.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Exponential is the wait after failure number n (n >= 1; below 1 counts
// as 1): first doubled n-1 times, capped at max. It never overflows,
// however large n is.
func Exponential(n int, first, max time.Duration) time.Duration {
	d := first
	for i := 1; i < n && d < max; i++ {
		if d > max/2 {
			return max
		}
		d *= 2
	}
	return min(d, max)
}

// EqualJitter spreads d: half of it fixed, the other half scaled by r, a
// number in [0, 1) (rand.Float64). No wait is shorter than d/2, and waits
// of workers that failed together spread over d/2.
func EqualJitter(d time.Duration, r float64) time.Duration {
	half := d / 2
	return half + time.Duration(float64(half)*r)
}

// Jittered is EqualJitter(d, r) with r drawn from math/rand/v2.
func Jittered(d time.Duration) time.Duration {
	return EqualJitter(d, rand.Float64())
}

// Loop is the backoff of one retry loop: each failure waits longer, up to
// Max, and a success starts over from First. The zero value is not useful;
// set First and Max. A Loop belongs to the goroutine that retries.
type Loop struct {
	First, Max time.Duration
	failures   int
}

// Failed records a failure and returns the wait before the next attempt:
// First, then twice that, and so on up to Max.
func (l *Loop) Failed() time.Duration {
	l.failures++
	return Exponential(l.failures, l.First, l.Max)
}

// Succeeded starts over: the next failure waits First again.
func (l *Loop) Succeeded() { l.failures = 0 }
