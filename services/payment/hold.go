package payment

// HoldStatus is the state of an authorization hold in our record (the
// payment_holds table): the orchestrated checkout's payment, placed by
// payment.authorize_hold, taken by payment.capture_hold and undone by
// payment.cancel_hold.
type HoldStatus string

// Hold statuses. Authorizing covers every state in which we do not yet
// know whether the provider placed the hold: row stored, call in flight,
// call failed with an unknown outcome.
const (
	HoldAuthorizing HoldStatus = "authorizing"
	HoldAuthorized  HoldStatus = "authorized"
	HoldDeclined    HoldStatus = "declined"
	HoldCaptured    HoldStatus = "captured"
	// HoldReleased: we canceled the hold (a compensation).
	HoldReleased HoldStatus = "released"
	// HoldExpired: the provider canceled the hold because nobody
	// captured it in time; it can never be captured.
	HoldExpired HoldStatus = "expired"
	// HoldRefunded: captured, then given back by a compensation.
	HoldRefunded HoldStatus = "refunded"
	// HoldVoid: a compensation arrived before any hold was asked for; an
	// authorize that comes later is refused, so nothing is held for a
	// saga that already rolled back.
	HoldVoid HoldStatus = "void"
)

// HoldStatuses lists every status, in the order a hold can reach them.
var HoldStatuses = []HoldStatus{HoldAuthorizing, HoldAuthorized, HoldDeclined, HoldCaptured, HoldReleased,
	HoldExpired, HoldRefunded, HoldVoid}

// holdRank orders statuses along the one path a hold moves on; a hold
// never goes back. Declined, released, expired, refunded and void are
// final.
func holdRank(s HoldStatus) int {
	switch s {
	case HoldAuthorizing:
		return 0
	case HoldAuthorized:
		return 1
	case HoldCaptured:
		return 2
	case HoldDeclined, HoldReleased, HoldExpired, HoldRefunded, HoldVoid:
		return 3
	}
	return -1
}

// HoldMoves reports whether a hold in status from may move to to when a
// provider answer, a webhook or a command's outcome says so. News older
// than what we know (a reordered "authorized" after "captured") and moves
// between two final statuses are refused; a capture can only follow an
// authorization. A refund follows a capture, possibly one not recorded
// yet: a compensation that finds the intent captured by a capture attempt
// still in flight refunds it, and the provider's word (refunded) wins over
// the capture's answer that comes later.
func HoldMoves(from, to HoldStatus) bool {
	rf, rt := holdRank(from), holdRank(to)
	if rf < 0 || rt < 0 || rt <= rf {
		return false
	}
	switch to {
	case HoldCaptured, HoldReleased, HoldExpired:
		return from == HoldAuthorizing || from == HoldAuthorized
	case HoldRefunded:
		return from == HoldCaptured || from == HoldAuthorized
	case HoldVoid, HoldDeclined:
		return from == HoldAuthorizing
	}
	return true
}

// StepAction is what a hold command does next, given the hold's status.
type StepAction int

const (
	// StepWait: the hold's authorization is still unknown; try the
	// command again later.
	StepWait StepAction = iota + 1
	// StepCall: call the provider (authorize, capture, cancel the hold).
	StepCall
	// StepRefund: a compensation of a captured hold: refund it.
	StepRefund
	// StepSucceed: reply succeeded without calling the provider.
	StepSucceed
	// StepFail: reply failed without calling the provider.
	StepFail
)

// Failure reasons of hold commands, as the step reply's reason carries them.
const (
	ReasonHoldExpired      = "hold_expired"
	ReasonHoldNotFound     = "hold_not_found"
	ReasonHoldNotHeld      = "hold_not_authorized"
	ReasonHoldCanceled     = "hold_canceled"
	ReasonAmountExceeds    = "amount_exceeds_hold"
	ReasonProviderRefused  = "provider_refused"
	ReasonCurrencyMismatch = "currency_mismatch"
)

// AuthorizeStep decides an authorize command. A hold placed once (even if
// since captured, released or expired) answers succeeded, so a repeated
// authorize gets the answer the first one got.
func AuthorizeStep(s HoldStatus) (StepAction, string) {
	switch s {
	case HoldAuthorizing:
		return StepCall, ""
	case HoldAuthorized, HoldCaptured, HoldReleased, HoldExpired, HoldRefunded:
		return StepSucceed, ""
	case HoldVoid:
		return StepFail, ReasonHoldCanceled
	}
	return StepFail, "" // declined: the reason is the decline code stored with the hold
}

// CaptureStep decides a capture command for a hold in status s, asked to
// take amount of held. A missing hold (found false) fails: there is
// nothing to capture.
func CaptureStep(s HoldStatus, found bool, held, amount int64) (StepAction, string) {
	if !found {
		return StepFail, ReasonHoldNotFound
	}
	switch s {
	case HoldAuthorizing:
		return StepWait, ""
	case HoldAuthorized:
		if amount > held {
			return StepFail, ReasonAmountExceeds
		}
		return StepCall, ""
	case HoldCaptured:
		return StepSucceed, ""
	case HoldExpired:
		return StepFail, ReasonHoldExpired
	case HoldReleased, HoldRefunded, HoldVoid:
		return StepFail, ReasonHoldCanceled
	}
	return StepFail, ReasonHoldNotHeld
}

// CancelStep decides a compensation (cancel_hold) for a hold in status s:
// release an authorized hold, refund a captured one, and succeed with
// nothing to do when no money is held. A missing hold succeeds too (the
// caller records it void first, so a late authorize is refused).
func CancelStep(s HoldStatus, found bool) StepAction {
	if !found {
		return StepSucceed
	}
	switch s {
	case HoldAuthorizing:
		return StepWait
	case HoldAuthorized:
		return StepCall
	case HoldCaptured:
		return StepRefund
	}
	return StepSucceed
}
