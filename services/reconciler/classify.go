package reconciler

import "time"

// Decision is the outcome of classifying one payment: a verdict and, when
// the drift is worth recording, its finding kind and (for Repairable only)
// the repair command to emit.
type Decision struct {
	Verdict Verdict
	Kind    Kind    // empty for InSync, InFlight and Unverifiable
	Command Command // set only when Verdict is Repairable
	// Verified says the comparison was made, so last_reconciled_at may
	// advance. False for Unverifiable and for rows skipped by the grace
	// window: neither was actually checked.
	Verified bool
}

// externalInFlight are provider statuses that will still change by
// themselves (the customer or the bank has a step left).
var externalInFlight = map[string]bool{
	ExtProcessing:           true,
	ExtRequiresAction:       true,
	ExtRequiresConfirmation: true,
	ExtRequiresCapture:      true,
}

var knownExternal = map[string]bool{
	ExtRequiresPaymentMethod: true, ExtRequiresConfirmation: true, ExtRequiresAction: true,
	ExtRequiresCapture: true, ExtProcessing: true, ExtSucceeded: true, ExtCanceled: true,
	ExtDeclined: true, ExtRefunded: true,
}

var knownLocal = map[string]bool{LocalPending: true, LocalPaid: true, LocalFailed: true, LocalRefunded: true}

// KnownExternal reports whether s is a provider status Classify knows.
func KnownExternal(s string) bool { return knownExternal[s] }

// Classify compares a payment's local status with the provider's. It is a
// pure function of the two strings: every row of the seed's classify is
// kept, and it is extended for refunds, declines and our "refunded" status.
// Unknown values on either side are NeedsReview, never a panic.
//
// The guiding rule: repair automatically only a transition the canonical
// writer would have applied had the webhook arrived (pending → paid,
// pending → failed, failed → paid), and nothing where goods may already
// have moved on money we do not have (paid here, not there) or where a
// refund happened behind our back: those go to a person.
func Classify(local, external string) Decision {
	if !knownLocal[local] {
		return Decision{Verdict: NeedsReview, Kind: KindUnknownLocalStatus}
	}
	if !knownExternal[external] {
		return Decision{Verdict: NeedsReview, Kind: KindUnknownExternalStatus}
	}
	if local == LocalPending && externalInFlight[external] {
		// Neither side has settled. (Paid here while in flight there is
		// the review case below.)
		return Decision{Verdict: InFlight}
	}
	switch local {
	case LocalPending:
		switch external {
		case ExtRequiresPaymentMethod:
			return Decision{Verdict: InSync}
		case ExtSucceeded:
			// A lost webhook: apply it through the same canonical path.
			return Decision{Verdict: Repairable, Kind: KindMissedSuccess, Command: CommandApplySucceeded}
		case ExtCanceled:
			return Decision{Verdict: Repairable, Kind: KindMissedCancel, Command: CommandApplyCanceled}
		case ExtDeclined:
			// The attempt failed at the provider; the saga would have marked
			// it failed on the payment_failed webhook.
			return Decision{Verdict: Repairable, Kind: KindMissedDecline, Command: CommandApplyCanceled}
		case ExtRefunded:
			// Succeeded and then refunded while we never saw either: marking
			// it paid would confirm an order whose money is gone.
			return Decision{Verdict: NeedsReview, Kind: KindPendingRefundedExternally}
		}
	case LocalPaid:
		switch external {
		case ExtSucceeded:
			return Decision{Verdict: InSync}
		case ExtRefunded:
			return Decision{Verdict: NeedsReview, Kind: KindRefundedExternally}
		default:
			// We acted as if paid (may have shipped) but the provider does
			// not have the money, whatever else it says.
			return Decision{Verdict: NeedsReview, Kind: KindPaidLocallyNotExternally}
		}
	case LocalFailed:
		switch external {
		case ExtCanceled, ExtDeclined, ExtRequiresPaymentMethod:
			// No money moved on either side.
			return Decision{Verdict: InSync}
		case ExtRefunded:
			// The money came back: the usual end of a reviewed
			// succeeded_externally_failed_locally finding.
			return Decision{Verdict: InSync}
		case ExtSucceeded:
			// The provider took the money after we gave up (a lost success
			// webhook after a timeout). The canonical writer applies
			// failed → paid for the live webhook too, because the provider
			// is the authority on where money is; payment-svc then refunds
			// it if the order was cancelled meanwhile.
			return Decision{Verdict: Repairable, Kind: KindSucceededExternallyFailedLocally, Command: CommandApplySucceeded}
		default:
			// Still moving at the provider. Whatever it settles on is
			// classified on the next visit (succeeded → review).
			return Decision{Verdict: InFlight}
		}
	case LocalRefunded:
		switch external {
		case ExtRefunded:
			return Decision{Verdict: InSync}
		case ExtSucceeded:
			return Decision{Verdict: NeedsReview, Kind: KindRefundedLocallyNotExternally}
		}
	}
	return Decision{Verdict: NeedsReview, Kind: Unexpected(local, external)}
}

// Row is the local side of one payment as the reconciler reads it.
type Row struct {
	PaymentID  int64
	OrderID    string
	ProviderID string // empty while the provider has not answered
	Status     string
	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Traceparent is the trace the payment was created in ("" when it
	// was created with tracing off): a repair command continues it.
	Traceparent string
}

// Outcome is how asking the provider about one payment went.
type Outcome int

// Outcomes.
const (
	// NotAsked: the row was not sent to the provider (grace window, no
	// provider reference, or the batch gave up after an outage).
	NotAsked Outcome = iota
	Observed
	Unavailable
	NotFound
)

// Observation is the provider side of one payment.
type Observation struct {
	Outcome Outcome
	Status  string // the external status when Outcome is Observed
}

// InGrace reports whether the row changed so recently that a difference
// would most likely be a webhook still on its way. Such rows are not sent to
// the provider at all.
func InGrace(r Row, now time.Time, grace time.Duration) bool {
	return now.Sub(r.UpdatedAt) < grace
}

// Decide turns a row and what the provider said about it into a Decision.
// It is pure: now is passed in (the database's clock, so every reconciler
// agrees on it).
func Decide(r Row, obs Observation, now time.Time, grace time.Duration) Decision {
	if InGrace(r, now, grace) {
		return Decision{Verdict: InFlight}
	}
	if r.ProviderID == "" {
		switch r.Status {
		case LocalFailed:
			// The saga only fails a payment without a provider reference
			// when the provider refused the create call: nothing exists
			// there to compare. Checked, and fine.
			return Decision{Verdict: InSync, Verified: true}
		default:
			return Decision{Verdict: NeedsReview, Kind: KindMissingProviderReference, Verified: true}
		}
	}
	switch obs.Outcome {
	case Observed:
		d := Classify(r.Status, obs.Status)
		d.Verified = true
		return d
	case NotFound:
		return Decision{Verdict: NeedsReview, Kind: KindMissingExternally, Verified: true}
	default:
		return Decision{Verdict: Unverifiable}
	}
}
