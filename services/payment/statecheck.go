package payment

import (
	"fmt"
	"time"
)

// KnownOrder is what the payment service learned of a choreographed order
// from order-svc's own events: order.created gives the charge (amount,
// currency, customer, payment method), order.confirmed says order-svc
// confirmed it. An order the service has no order.created for is unknown,
// whatever other events name it.
type KnownOrder struct {
	Amount        int64
	Currency      string
	CustomerID    string
	PaymentMethod string // "" reads as DefaultPaymentMethod
	Confirmed     bool
}

// ReservationClaim is what an inventory.reserved asks the payment service
// to charge. It is checked against the KnownOrder; the charge itself is
// made with the order's own fields.
type ReservationClaim struct {
	Amount        int64
	Currency      string
	CustomerID    string
	PaymentMethod string // "" reads as DefaultPaymentMethod
}

// DefaultPaymentMethod is what an order or a reservation that names no
// payment method means.
const DefaultPaymentMethod = "pm_card_visa"

// Reasons an event contradicts what the payment service knows. They are
// the reason column of refused_events and the reason label of
// concord_contradicting_events_total.
const (
	// ReasonUnknownOrder: no order.created was seen for the order (for a
	// reservation: not within the wait).
	ReasonUnknownOrder = "unknown_order"
	// ReasonAmountMismatch: the reservation's amount or currency is not
	// the order's total.
	ReasonAmountMismatch = "amount_mismatch"
	// ReasonPayerMismatch: the reservation names another customer or
	// payment method than the order.
	ReasonPayerMismatch = "payer_mismatch"
	// ReasonOrderConfirmed: a cancellation of an order order-svc confirmed.
	// A confirmed order is terminal; order-svc never cancels it.
	ReasonOrderConfirmed = "order_confirmed"
)

// Verdict is what the payment service does with a reservation.
type Verdict int

const (
	// Charge: the reservation matches its order; store the intent.
	Charge Verdict = iota + 1
	// Wait: the order is not known yet (order.created travels on another
	// topic than inventory.reserved and may come later); keep the
	// reservation aside, acknowledged, until it arrives.
	Wait
	// Refuse: the reservation contradicts what is known; record it with
	// its reason and charge nothing.
	Refuse
)

func (v Verdict) String() string {
	switch v {
	case Charge:
		return "charge"
	case Wait:
		return "wait"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// CheckReservation decides a reservation against the order it names: o is
// nil while the order is unknown, waited is how long the reservation has
// been kept aside (zero when it just arrived) and wait how long an unknown
// order is waited for. A reservation for a known order is charged only
// when it asks for exactly the order's total, in its currency, from its
// customer and payment method; anything else is refused with the first
// reason that applies (amount before payer). A reservation whose order is
// still unknown after wait is refused as ReasonUnknownOrder; wait zero
// refuses it at once.
func CheckReservation(o *KnownOrder, r ReservationClaim, waited, wait time.Duration) (Verdict, string) {
	if o == nil {
		if waited >= wait {
			return Refuse, ReasonUnknownOrder
		}
		return Wait, ""
	}
	if r.Amount != o.Amount || r.Currency != o.Currency {
		return Refuse, ReasonAmountMismatch
	}
	if r.CustomerID != o.CustomerID || method(r.PaymentMethod) != method(o.PaymentMethod) {
		return Refuse, ReasonPayerMismatch
	}
	return Charge, ""
}

// CheckCancellation decides an order.cancelled against the order it names:
// refund is true when the cancellation may take effect (mark the order
// cancelled, refund a payment that is or becomes paid). A cancellation of
// a confirmed order contradicts order-svc, which never cancels one: it is
// refused as ReasonOrderConfirmed, refunds nothing and goes to review. A
// cancellation of an unknown order takes effect: it moves no money, and it
// keeps a reservation that might still come from being charged.
func CheckCancellation(o *KnownOrder) (refund bool, reason string) {
	if o != nil && o.Confirmed {
		return false, ReasonOrderConfirmed
	}
	return true, ""
}

// CheckConfirmation decides an order.confirmed: it is recorded for a known
// order and refused as ReasonUnknownOrder otherwise (order.created comes
// before it on the order's partition, so an unknown order means an order
// this service never learned about).
func CheckConfirmation(o *KnownOrder) (record bool, reason string) {
	if o == nil {
		return false, ReasonUnknownOrder
	}
	return true, ""
}

func method(m string) string {
	if m == "" {
		return DefaultPaymentMethod
	}
	return m
}
