// Package shipping is the shipping service's domain: a shipment's states,
// the commands the orchestrated saga sends it, and the pure decision of
// what the worker does next with a shipment. It has no I/O; the adapters
// sit beside it (shippingstore, shippingcarrier, shippingconsumer, shipper).
//
// A shipment is one row per idempotency key (derived by the orchestrator
// from the saga and step). The row is stored before the carrier is called;
// every call is counted before it is made, so a shipment whose answer was
// lost (a timeout, a crash between the call and the commit) is looked up
// at the carrier by its key before any new call, and the carrier creates
// at most one label per key.
package shipping

import "time"

// Status is where a shipment is at the carrier, as far as we know.
type Status string

const (
	// StatusPending: the row is stored, the carrier has not (knowingly)
	// created the shipment yet.
	StatusPending Status = "PENDING"
	// StatusCreated: the carrier created it; CarrierID is known.
	StatusCreated Status = "CREATED"
	// StatusDeclined: the carrier refused it (address, postal code).
	StatusDeclined Status = "DECLINED"
	// StatusCancelled: voided at the carrier, or never created because
	// it was cancelled (or given up) first.
	StatusCancelled Status = "CANCELLED"
)

// CancelStatus is where a cancellation is.
type CancelStatus string

const (
	CancelNone    CancelStatus = ""        // none asked
	CancelPending CancelStatus = "PENDING" // asked, not done
	CancelDone    CancelStatus = "DONE"    // no live shipment remains at the carrier
	CancelFailed  CancelStatus = "FAILED"  // the carrier refused or did not answer in time
)

// Outcome is a reply's verdict, as saga.step_replied carries it.
type Outcome string

const (
	Succeeded Outcome = "succeeded"
	Failed    Outcome = "failed"
)

// Reasons of failed replies (beside the carrier's decline codes).
const (
	// ReasonCarrierUnavailable: the carrier did not answer within the
	// step's budget. For a create, the service keeps looking the key up
	// and voids whatever it finds, so no shipment outlives the answer.
	ReasonCarrierUnavailable = "carrier_unavailable"
	// ReasonCancelledFirst: the cancellation arrived before the shipment
	// was created; it never will be.
	ReasonCancelledFirst = "cancelled_before_created"
	// ReasonAlreadyShipped: the parcel left; it cannot be cancelled.
	ReasonAlreadyShipped = "shipment_already_shipped"
	// ReasonUnknownAtCarrier: the carrier does not know the shipment we
	// recorded; an operator must look.
	ReasonUnknownAtCarrier = "shipment_unknown_at_carrier"
	// ReasonRefused: the carrier refused our request as malformed.
	ReasonRefused = "carrier_refused_request"
)

// CompensateSuffix ends the idempotency key of a step's compensation (seed
// 001's "<key>_compensate").
const CompensateSuffix = "_compensate"

// CompensationKey is the key of the compensation of the step whose key is key.
func CompensationKey(key string) string { return key + CompensateSuffix }

// Address is where a shipment goes.
type Address struct {
	Line1      string `json:"line1"`
	Line2      string `json:"line2,omitempty"`
	City       string `json:"city"`
	PostalCode string `json:"postal_code"`
	Country    string `json:"country"`
}

// Item is one line of a shipment.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// Parcel is what the carrier is asked to ship.
type Parcel struct {
	OrderID string  `json:"order_id"`
	Address Address `json:"address"`
	Items   []Item  `json:"items"`
}

// Action is what the worker does next with a shipment.
type Action int

const (
	// Wait: nothing to do.
	Wait Action = iota
	// Create calls the carrier's create with the key (no earlier call).
	Create
	// Lookup asks the carrier for the key's shipment first: an earlier
	// call may have created one whose answer we never recorded. Then
	// Create (not found, no cancellation) or settle.
	Lookup
	// Cancel voids the known shipment at the carrier.
	Cancel
	// SettleCancelled records a cancellation that needs no carrier call:
	// nothing was ever sent, or there is nothing live to void.
	SettleCancelled
	// GiveUpCreate replies failed (carrier_unavailable) and turns to
	// voiding whatever an earlier call may have created.
	GiveUpCreate
	// GiveUpCancel replies the cancellation failed (carrier_unavailable).
	GiveUpCancel
)

func (a Action) String() string {
	switch a {
	case Wait:
		return "wait"
	case Create:
		return "create"
	case Lookup:
		return "lookup"
	case Cancel:
		return "cancel"
	case SettleCancelled:
		return "settle_cancelled"
	case GiveUpCreate:
		return "give_up_create"
	case GiveUpCancel:
		return "give_up_cancel"
	}
	return "unknown"
}

// State is what Next decides from.
type State struct {
	Status       Status
	CancelStatus CancelStatus
	// CreateCalls counts create calls made (each counted before it is
	// sent): above zero, the carrier may hold a shipment we never heard of.
	CreateCalls int
	// CreateDeadline and CancelDeadline end the steps' budgets.
	CreateDeadline, CancelDeadline time.Time
	// InternalCancel: the cancellation is our own voiding after a
	// give-up; nobody waits for its reply, so it has no budget.
	InternalCancel bool
}

// Next decides the worker's next action on s at now.
func Next(s State, now time.Time) Action {
	cancelling := s.CancelStatus == CancelPending
	switch s.Status {
	case StatusPending:
		switch {
		case cancelling && s.CreateCalls == 0:
			return SettleCancelled
		case cancelling && !s.InternalCancel && !now.Before(s.CancelDeadline):
			return GiveUpCancel
		case cancelling:
			return Lookup
		case !now.Before(s.CreateDeadline):
			return GiveUpCreate
		case s.CreateCalls > 0:
			return Lookup
		}
		return Create
	case StatusCreated:
		switch {
		case !cancelling:
			return Wait
		case !s.InternalCancel && !now.Before(s.CancelDeadline):
			return GiveUpCancel
		}
		return Cancel
	case StatusDeclined, StatusCancelled:
		if cancelling {
			return SettleCancelled
		}
	}
	return Wait
}
