// Package audit checks the invariants that span the saga's services: what
// order-svc, inventory-svc and payment-svc recorded (and, for orchestrated
// orders, the orchestrator and shipping-svc), and what the payment provider
// holds, must tell one consistent story. The demo prints these
// checks, the saga tests assert them, and fault runs can reuse them.
//
// The checks are pure functions over a Snapshot; they do no I/O and are
// tested with tables. auditsnapshot reads a Snapshot from the services'
// databases and the provider. A check is meaningful only once the saga is
// quiet (no order in flight, every outbox published, no consumer lag): in
// the middle of a run an order may be confirmed while its stock is still
// being committed.
package audit

import (
	"fmt"
	"strings"
	"time"

	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/reconciler"
)

// Snapshot is what the checks read, taken when the saga is quiet.
type Snapshot struct {
	Orders       []Order       // order-svc: orders
	History      []string      // order-svc: the event id of every order_history row that has one
	Reservations []Reservation // inventory-svc: reservations
	Stock        []Stock       // inventory-svc: stock
	Payments     []Payment     // payment-svc: payments
	Transitions  []Transition  // payment-svc: payment_transitions
	Events       []Event       // every outbox row of the three services
	Findings     []reconciler.Finding
	// The orchestrated checkout: the orchestrator's sagas, payment-svc's
	// authorization holds and shipping-svc's shipments. Empty when no
	// orchestrator runs.
	Sagas     []SagaRun
	Holds     []Hold
	Shipments []Shipment
	// Refused are the events payment-svc and inventory-svc refused as
	// contradicting what they know (refused_events).
	Refused []Refused
	// Provider maps an order id (the metadata every payment carries) to
	// the payments the provider holds for it.
	Provider map[string][]ProviderPayment
}

// Order is one row of order-svc's orders.
type Order struct {
	ID         string
	Status     order.Status
	Flow       order.Flow
	CreatedAt  time.Time
	TerminalAt time.Time // zero while the order is in flight
	Items      []inventory.Line
}

// Reservation is one row of inventory-svc's reservations.
type Reservation struct {
	OrderID string
	Status  inventory.Status
}

// Stock is one SKU's counters in inventory-svc.
type Stock struct {
	SKU                            string
	Available, Reserved, Committed int64
}

// Payment is one row of payment-svc's payments.
type Payment struct {
	ID      int64
	OrderID string
	Status  payment.Status
}

// Transition is one row of payment_transitions.
type Transition struct {
	PaymentID int64
	To        payment.Status
	Source    string
}

// Event is one outbox row: an effect a service announced.
type Event struct {
	Service     string // "order-svc", "inventory-svc", "payment-svc", "shipping-svc", "orchestrator"
	AggregateID string
	Type        string
}

// ProviderPayment is one payment at the provider.
type ProviderPayment struct {
	ID     string
	Status paymentprovider.Status
}

// Refused is one event a state-checked consumer refused.
type Refused struct {
	Service   string
	EventType string
	OrderID   string
	Reason    string
}

// Violation is one thing that breaks a check: the order, SKU, payment or
// finding it concerns, and what is wrong with it.
type Violation struct {
	Subject string
	Problem string
}

func (v Violation) String() string { return v.Subject + ": " + v.Problem }

// Result is the outcome of one check.
type Result struct {
	Check      string // the invariant, e.g. "no event applied twice"
	Summary    string // what was looked at; empty when there is nothing to say
	Violations []Violation
}

// Holds reports whether the invariant holds.
func (r Result) Holds() bool { return len(r.Violations) == 0 }

// Detail is the summary followed by the first few violations, for a
// one-line report.
func (r Result) Detail() string {
	parts := []string{}
	if r.Summary != "" {
		parts = append(parts, r.Summary)
	}
	if n := len(r.Violations); n > 0 {
		few := make([]string, 0, 3)
		for _, v := range r.Violations[:min(n, 3)] {
			few = append(few, v.String())
		}
		s := strings.Join(few, "; ")
		if n > 3 {
			s = fmt.Sprintf("%d violations, e.g. %s", n, s)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// Saga runs the saga's checks: every order terminal within bound, confirmed
// exactly when paid and stock committed, cancelled without a charge or a
// held reservation, stock conserved against what was stocked (units per
// SKU), and no effect recorded twice.
// The orchestrated orders' checks (Orchestrated) follow when the snapshot
// holds any saga.
func Saga(s Snapshot, bound time.Duration, stocked map[string]int64) []Result {
	rs := []Result{
		TerminalWithin(s, bound),
		ConfirmedIffPaid(s),
		CancelledWithoutCharge(s),
		StockConserved(s, stocked),
		AppliedOnce(s),
		NothingRefused(s),
	}
	if len(s.Sagas) > 0 || orchestratedOrders(s) > 0 {
		rs = append(rs, Orchestrated(s)...)
	}
	return rs
}

// NothingRefused checks that no consumer refused an event as contradicting
// what it knows. The saga's own events never contradict each other, so in a
// deployment nobody forges events into, a refusal is a state check that
// refused the truth.
func NothingRefused(s Snapshot) Result {
	r := Result{Check: "no event refused by a state check", Summary: fmt.Sprintf("%d refused", len(s.Refused))}
	for _, e := range s.Refused {
		r.Violations = append(r.Violations, Violation{e.Service + " " + e.OrderID, fmt.Sprintf("%s refused: %s", e.EventType, e.Reason)})
	}
	return r
}

// Reconciliation runs the reconciler's checks: every repairable drift
// healed through the canonical writer, and nothing left for review.
func Reconciliation(s Snapshot) []Result {
	return []Result{DriftHealed(s), NothingForReview(s)}
}
