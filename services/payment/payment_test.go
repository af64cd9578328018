package payment

import (
	"errors"
	"testing"
)

func TestDecide(t *testing.T) {
	cases := []struct {
		from, to Status
		want     Decision
	}{
		{StatusPending, StatusPaid, Apply},
		{StatusPending, StatusFailed, Apply},
		{StatusPending, StatusRefunded, Apply},
		{StatusPaid, StatusPaid, AlreadyDone},
		{StatusPaid, StatusFailed, Stale},
		{StatusPaid, StatusRefunded, Apply},
		{StatusFailed, StatusFailed, AlreadyDone},
		{StatusFailed, StatusPaid, Apply},
		{StatusFailed, StatusRefunded, Apply},
		{StatusRefunded, StatusRefunded, AlreadyDone},
		{StatusRefunded, StatusPaid, Stale},
		{StatusRefunded, StatusFailed, Stale},
	}
	for _, c := range cases {
		got, err := Decide(c.from, c.to)
		if err != nil || got != c.want {
			t.Errorf("Decide(%s, %s) = %v, %v; want %v", c.from, c.to, got, err, c.want)
		}
	}
}

func TestDecideRefusesNonTransitions(t *testing.T) {
	for _, c := range [][2]Status{
		{StatusPaid, StatusPending}, {StatusPending, StatusPending}, {"bogus", StatusPaid}, {StatusPending, "bogus"},
	} {
		if _, err := Decide(c[0], c[1]); !errors.Is(err, ErrInvalidTransition) {
			t.Errorf("Decide(%q, %q) err = %v; want ErrInvalidTransition", c[0], c[1], err)
		}
	}
}

func TestOutcomeTarget(t *testing.T) {
	cases := []struct {
		o    Outcome
		want Status
		ok   bool
	}{
		{OutcomeUnknown, "", false},
		{OutcomePending, "", false},
		{OutcomeSucceeded, StatusPaid, true},
		{OutcomeDeclined, StatusFailed, true},
		{OutcomeRefunded, StatusRefunded, true},
	}
	for _, c := range cases {
		if got, ok := c.o.Target(); got != c.want || ok != c.ok {
			t.Errorf("Outcome(%d).Target() = %q, %v; want %q, %v", c.o, got, ok, c.want, c.ok)
		}
	}
}

func TestIdempotencyKeyDependsOnlyOnTheOrder(t *testing.T) {
	if IdempotencyKey("a") != IdempotencyKey("a") || IdempotencyKey("a") == IdempotencyKey("b") {
		t.Fatal("idempotency keys must be a function of the order id alone")
	}
}

// The webhook decides "nothing to do" without the payment's row lock. That
// is safe only if news that changes nothing for a status changes nothing
// for every status the payment can move on to.
func TestNewsThatChangesNothingNeverChangesAnythingLater(t *testing.T) {
	all := []Status{StatusPending, StatusFailed, StatusPaid, StatusRefunded}
	targets := all[1:]
	// later[s] is every status reachable from s by applied transitions.
	later := map[Status][]Status{}
	for _, s := range all {
		seen := map[Status]bool{s: true}
		for frontier := []Status{s}; len(frontier) > 0; {
			cur := frontier[0]
			frontier = frontier[1:]
			for _, to := range targets {
				if d, _ := Decide(cur, to); d == Apply && !seen[to] {
					seen[to] = true
					later[s] = append(later[s], to)
					frontier = append(frontier, to)
				}
			}
		}
	}
	for _, s := range all {
		for _, to := range targets {
			if d, _ := Decide(s, to); d == Apply {
				continue
			}
			for _, s2 := range later[s] {
				if d, _ := Decide(s2, to); d == Apply {
					t.Errorf("%s → %s changes nothing, but after the payment moves on to %s it applies", s, to, s2)
				}
			}
		}
	}
}
