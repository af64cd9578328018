// Package payment is the payment service's domain: the states of a payment,
// the rules that move it between them, and how an order's id becomes the
// idempotency key every provider call carries. It does no I/O; the
// postgres sub-package is the canonical writer that applies these rules,
// and every path that learns a payment's outcome (the synchronous provider
// answer, a webhook, the reconciler's repair command) goes through it.
package payment

import (
	"errors"
	"fmt"

	"github.com/concordhq/concord/schemas/contract"
)

// Status is a payment's state in our record.
type Status string

// The payments table's statuses. Pending covers every state in which money
// has not moved as far as we know: intent stored, call in flight, call
// failed with an unknown outcome, provider says processing.
const (
	StatusPending  Status = "pending"
	StatusPaid     Status = "paid"
	StatusFailed   Status = "failed"
	StatusRefunded Status = "refunded"
)

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusPaid, StatusFailed, StatusRefunded:
		return true
	}
	return false
}

// Decision is what a requested transition amounts to given the current
// status.
type Decision int

const (
	// Apply: change the status, bump the version, emit the event.
	Apply Decision = iota + 1
	// AlreadyDone: the payment is already in the target status; a retry,
	// a duplicated webhook or a repair that raced a live event.
	AlreadyDone
	// Stale: the request is older news than what we know (a reordered
	// webhook saying "failed" after the payment succeeded, or "succeeded"
	// after it was refunded). Nothing changes and nothing is wrong.
	Stale
)

func (d Decision) String() string {
	switch d {
	case Apply:
		return "apply"
	case AlreadyDone:
		return "already-done"
	case Stale:
		return "stale"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// ErrInvalidTransition is returned for a target that is not a transition at
// all (back to pending, or an unknown status).
var ErrInvalidTransition = errors.New("payment: invalid transition")

// Decide says what moving a payment from `from` to `to` amounts to.
//
// The provider is the authority on where money is, so the rules follow it:
// a payment we recorded as failed that the provider reports as succeeded
// becomes paid (the money moved; the order was cancelled meanwhile, so the
// payment service will refund it), and refunded is final because a refund
// is the last thing that can happen to a charge. Paid never goes back to
// failed: a "failed" arriving after "succeeded" is a reordered notice of an
// earlier attempt.
func Decide(from, to Status) (Decision, error) {
	if !from.Valid() || !to.Valid() || to == StatusPending {
		return 0, fmt.Errorf("%w: %q → %q", ErrInvalidTransition, from, to)
	}
	if from == to {
		return AlreadyDone, nil
	}
	switch from {
	case StatusPending:
		return Apply, nil
	case StatusPaid:
		if to == StatusRefunded {
			return Apply, nil
		}
		return Stale, nil
	case StatusFailed:
		return Apply, nil
	case StatusRefunded:
		return Stale, nil
	}
	return 0, fmt.Errorf("%w: %q → %q", ErrInvalidTransition, from, to)
}

// EventType is the event a transition into status emits ("" for none).
func EventType(to Status) contract.Type {
	switch to {
	case StatusPaid:
		return contract.TypePaymentProcessed
	case StatusFailed:
		return contract.TypePaymentFailed
	case StatusRefunded:
		return contract.TypePaymentRefunded
	}
	return ""
}

// IdempotencyKey is the provider Idempotency-Key of an order's charge. It
// depends only on the order, so every attempt for that order, from any
// process and after any crash, sends the same key and the provider charges
// at most once.
func IdempotencyKey(orderID string) string { return "order-" + orderID + "-charge" }

// RefundKey is the Idempotency-Key of a payment's full refund.
func RefundKey(paymentID int64) string { return fmt.Sprintf("payment-%d-refund", paymentID) }

// Outcome is what the provider said about a charge, reduced to what the
// payment service acts on.
type Outcome int

const (
	// OutcomeUnknown: no answer (timeout, 5xx, 429); retry with the same key.
	OutcomeUnknown Outcome = iota + 1
	// OutcomePending: the provider has the payment but has not settled it
	// (processing); a webhook or a later read will tell.
	OutcomePending
	// OutcomeSucceeded: the money moved.
	OutcomeSucceeded
	// OutcomeDeclined: the provider refused the charge.
	OutcomeDeclined
	// OutcomeRefunded: the money moved and came back in full.
	OutcomeRefunded
)

// Target is the status an outcome moves a payment to; ok is false when the
// payment stays as it is.
func (o Outcome) Target() (s Status, ok bool) {
	switch o {
	case OutcomeSucceeded:
		return StatusPaid, true
	case OutcomeDeclined:
		return StatusFailed, true
	case OutcomeRefunded:
		return StatusRefunded, true
	}
	return "", false
}
