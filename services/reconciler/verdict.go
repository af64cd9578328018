// Package reconciler finds every difference between the payments database
// and the payment provider and heals what is safe to heal.
//
// The pipeline is detect → classify → record finding → repair command →
// canonical writer. This package holds the domain: the verdicts, the finding
// kinds, the pure Classify and Decide functions, and the Scanner and Healer
// that drive them through small interfaces (Store, Provider, Lister,
// EventLister). Adapters live beside it: reconciler/postgres (cursor,
// findings, lag), reconciler/stripe (the provider through stripe-go) and
// reconciler/repair (the payment-commands handler payment-svc runs).
package reconciler

import (
	"errors"

	"github.com/concordhq/concord/schemas/contract"
)

// Verdict is what the reconciler concluded about one payment.
type Verdict string

// Verdicts. Only Repairable leads to an automatic change, and only through a
// repair command applied by the canonical writer.
const (
	// InSync: both sides agree (or disagree in a way that moves no money).
	InSync Verdict = "in_sync"
	// InFlight: the row changed within the grace window, or the provider
	// is still working on it. Not judged now; the next visit decides.
	InFlight Verdict = "in_flight"
	// Repairable: a transition we missed (a lost webhook) that the canonical
	// writer may apply, because it only moves the row the way the provider
	// already went and nothing was promised to anyone yet.
	Repairable Verdict = "repairable"
	// NeedsReview: a difference where money or goods may already have moved
	// the wrong way; a person decides.
	NeedsReview Verdict = "needs_review"
	// Unverifiable: the provider could not be asked (timeout, 429, 5xx).
	// Never counted as healthy; last_reconciled_at does not advance.
	Unverifiable Verdict = "unverifiable"
)

// Verdicts lists every verdict, for metrics and reports.
var Verdicts = []Verdict{InSync, InFlight, Repairable, NeedsReview, Unverifiable}

// Local statuses: the payments.status values of the saga.
const (
	LocalPending  = "pending"
	LocalPaid     = "paid"
	LocalFailed   = "failed"
	LocalRefunded = "refunded"
)

// External statuses: a Stripe PaymentIntent's status, plus two that the
// provider adapter derives because the raw status hides them: Declined
// (requires_payment_method with a last_payment_error: the attempt failed)
// and Refunded (succeeded with the whole amount refunded). A partial refund
// stays Succeeded.
const (
	ExtRequiresPaymentMethod = "requires_payment_method"
	ExtRequiresConfirmation  = "requires_confirmation"
	ExtRequiresAction        = "requires_action"
	ExtRequiresCapture       = "requires_capture"
	ExtProcessing            = "processing"
	ExtSucceeded             = "succeeded"
	ExtCanceled              = "canceled"
	ExtDeclined              = "declined"
	ExtRefunded              = "refunded"
)

// Kind names a finding: the shape of the drift. Kinds are stored in
// reconciliation_findings.kind and are part of the operator's vocabulary.
type Kind string

// Finding kinds.
const (
	// KindMissedSuccess: pending here, succeeded there (a lost
	// payment_intent.succeeded webhook). Repairable.
	KindMissedSuccess Kind = "missed_success"
	// KindMissedCancel: pending here, canceled there. Repairable.
	KindMissedCancel Kind = "missed_cancel"
	// KindMissedDecline: pending here, declined there (a lost
	// payment_intent.payment_failed). Repairable with the cancel command.
	KindMissedDecline Kind = "missed_decline"
	// KindPaidLocallyNotExternally: we treated the payment as paid (the
	// order may have shipped) but the provider does not have the money.
	KindPaidLocallyNotExternally Kind = "paid_locally_not_externally"
	// KindRefundedExternally: paid here, fully refunded at the provider
	// (a dashboard refund, a lost refund webhook, a late reversal).
	KindRefundedExternally Kind = "refunded_externally"
	// KindSucceededExternallyFailedLocally: we recorded the payment as
	// failed but the provider took the money. Repairable with the succeeded
	// command: the canonical writer moves it to paid (as the live webhook
	// would) and payment-svc refunds it if the order was cancelled.
	KindSucceededExternallyFailedLocally Kind = "succeeded_externally_failed_locally"
	// KindRefundedLocallyNotExternally: refunded here, not (fully) at the
	// provider.
	KindRefundedLocallyNotExternally Kind = "refunded_locally_not_externally"
	// KindPendingRefundedExternally: pending here, yet the provider took the
	// money and gave it all back. Nothing to apply automatically.
	KindPendingRefundedExternally Kind = "pending_refunded_externally"
	// KindMissingExternally: the provider says it has no such payment.
	KindMissingExternally Kind = "missing_externally"
	// KindMissingProviderReference: past the grace window the row still
	// has no provider_payment_id, so it cannot be compared (a create call
	// that never got its answer, or a row written outside the saga).
	KindMissingProviderReference Kind = "missing_provider_reference"
	// KindUnknownExternalStatus: the provider answered with a status this
	// version does not know. Logged and reviewed, never a crash.
	KindUnknownExternalStatus Kind = "unknown_external_status"
	// KindUnknownLocalStatus: payments.status holds a value the reconciler
	// does not know (a newer saga version, a manual edit).
	KindUnknownLocalStatus Kind = "unknown_local_status"
)

// Unexpected is the kind of a known-but-unplanned pair, as in the seed:
// "unexpected:<local>-><external>".
func Unexpected(local, external string) Kind {
	return Kind("unexpected:" + local + "->" + external)
}

// Command is the event type of a repair command on the payment-commands
// topic. Each is a versioned schema in schemas/events.
type Command string

// Repair commands.
const (
	// CommandApplySucceeded asks payment-svc to move a pending payment to
	// paid through its canonical writer.
	CommandApplySucceeded = Command(contract.TypePaymentApplySucceeded)
	// CommandApplyCanceled asks payment-svc to move a pending payment to
	// failed (the provider canceled or declined it).
	CommandApplyCanceled = Command(contract.TypePaymentApplyCanceled)
)

// Sentinel errors callers branch on; returned errors wrap them with %w.
var (
	// ErrConcurrentRun: another reconciler advanced the cursor first; this
	// batch's writes were rolled back and its work discarded.
	ErrConcurrentRun = errors.New("reconciler: another run advanced the cursor first")
	// ErrProviderUnavailable: the provider could not be asked (timeout,
	// transport error, 429, 5xx). Provider adapters wrap their own
	// "unavailable" error with it.
	ErrProviderUnavailable = errors.New("reconciler: provider unavailable")
	// ErrProviderNotFound: the provider has no such object.
	ErrProviderNotFound = errors.New("reconciler: not found at the provider")
	// ErrFindingNotFound: no finding with that id.
	ErrFindingNotFound = errors.New("reconciler: no such finding")
	// ErrFindingResolved: the finding is already resolved.
	ErrFindingResolved = errors.New("reconciler: finding already resolved")
)
