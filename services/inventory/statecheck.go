package inventory

import "github.com/concordhq/concord/schemas/contract"

// Event is a choreographed saga event the inventory service checks
// against what it knows of the order before it moves stock on it. The
// orchestrated saga's commands and saga.finished are not checked here:
// the orchestrator answers for them (see inventorystore.Op).
type Event = contract.Type

// The events checked.
const (
	OrderConfirmed   = contract.TypeOrderConfirmed   // notes the confirmation
	PaymentProcessed = contract.TypePaymentProcessed // commits
	PaymentFailed    = contract.TypePaymentFailed    // releases
	OrderCancelled   = contract.TypeOrderCancelled   // releases
)

// Known is what the inventory service knows of an order: an order is
// known when it holds a reservation for it, which only order.created (or
// the orchestrator's reserve_stock) makes; Confirmed is set by
// order.confirmed; Orchestrated says the orchestrated saga made the
// reservation.
type Known struct {
	Reserved     bool
	Status       Status
	Confirmed    bool
	Orchestrated bool
}

// Reasons an event contradicts what the inventory service knows. They are
// the reason column of refused_events and the reason label of
// concord_contradicting_events_total.
const (
	// ReasonUnknownOrder: no reservation for the order, so no
	// order.created was ever seen for it.
	ReasonUnknownOrder = "unknown_order"
	// ReasonOrderConfirmed: a release of an order order-svc confirmed (a
	// confirmed order is terminal; its stock stays committed).
	ReasonOrderConfirmed = "order_confirmed"
	// ReasonPaymentSucceeded: payment.failed for a reservation committed
	// on payment.processed. A paid payment never goes back to failed, so
	// payment-svc sends no such event.
	ReasonPaymentSucceeded = "payment_succeeded"
	// ReasonOrchestratedOrder: a choreographed event for an order of the
	// orchestrated saga, which order-svc and payment-svc never send one
	// for; the orchestrator alone moves its stock.
	ReasonOrchestratedOrder = "orchestrated_order"
)

// Check says whether e contradicts what is known of its order, and why.
// A contradicting event moves no stock: it is recorded for review. What
// it leaves alone is what the saga never does: it never commits,
// releases or confirms an order the service has no reservation for; it
// never cancels a confirmed order nor fails a payment after it
// succeeded; and it never sends choreographed events for an orchestrated
// order. Everything else goes on to Decide, which absorbs duplicates and
// late events as before (a COMMITTED reservation whose order timed out
// is still released: that order was never confirmed).
func Check(k Known, e Event) (reason string, contradicts bool) {
	switch {
	case !k.Reserved:
		return ReasonUnknownOrder, true
	case k.Orchestrated:
		return ReasonOrchestratedOrder, true
	case k.Confirmed && (e == OrderCancelled || e == PaymentFailed):
		return ReasonOrderConfirmed, true
	case e == PaymentFailed && k.Status == StatusCommitted:
		return ReasonPaymentSucceeded, true
	}
	return "", false
}
