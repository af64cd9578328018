package audit

import (
	"fmt"

	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/orchestrator"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/shipping"
)

// SagaRun is one row of the orchestrator's saga_executions.
type SagaRun struct {
	ID       string
	OrderID  string
	Status   orchestrator.Status
	Reviewed bool // a saga_reviews entry exists for it
}

// Hold is one row of payment-svc's payment_holds.
type Hold struct {
	OrderID string
	Status  payment.HoldStatus
}

// Shipment is one row of shipping-svc's shipments.
type Shipment struct {
	OrderID string
	Status  shipping.Status
}

// Orchestrated runs the orchestrated checkout's checks: every saga ended
// and its order with it, a completed saga has every effect, a compensated
// one none left, and a failed one is in front of an operator.
func Orchestrated(s Snapshot) []Result {
	return []Result{SagasEnded(s), CompletedIffEffects(s), CompensatedUndone(s), FailedReviewed(s)}
}

// SagasEnded checks that every saga is terminal and that each orchestrated
// order ended as its saga did: CONFIRMED when it completed, CANCELLED when
// it was compensated or failed.
func SagasEnded(s Snapshot) Result {
	r := Result{Check: "every saga terminal, its order ended as the saga"}
	sagas := sagasByOrder(s)
	for _, sg := range s.Sagas {
		if !sagaTerminal(sg.Status) {
			r.Violations = append(r.Violations, Violation{"saga " + sg.ID, "still " + string(sg.Status)})
		}
	}
	n := 0
	for _, o := range s.Orders {
		if o.Flow != order.FlowOrchestrated {
			continue
		}
		n++
		sg, ok := sagas[o.ID]
		if !ok {
			r.Violations = append(r.Violations, Violation{o.ID, fmt.Sprintf("orchestrated order %s has no saga", o.Status)})
			continue
		}
		want := map[orchestrator.Status]order.Status{orchestrator.StatusCompleted: order.StatusConfirmed,
			orchestrator.StatusCompensated: order.StatusCancelled, orchestrator.StatusFailed: order.StatusCancelled}[sg.Status]
		if want != "" && o.Status != want {
			r.Violations = append(r.Violations, Violation{o.ID, fmt.Sprintf("%s, its saga %s", o.Status, sg.Status)})
		}
	}
	r.Summary = fmt.Sprintf("%d sagas, %d orchestrated orders", len(s.Sagas), n)
	return r
}

// CompletedIffEffects checks that a saga completed exactly when its
// payment was captured (the hold and the provider agree), its stock was
// committed and its shipment booked.
func CompletedIffEffects(s Snapshot) Result {
	r := Result{Check: "COMPLETED ⇔ captured payment, committed stock and a shipment"}
	holds, shipments, reservations := holdsByOrder(s), shipmentsByOrder(s), reservationsByOrder(s)
	completed := 0
	for _, sg := range s.Sagas {
		if !sagaTerminal(sg.Status) || sg.Status == orchestrator.StatusFailed {
			continue // SagasEnded and FailedReviewed speak of these
		}
		ps := s.Provider[sg.OrderID]
		captured := holds[sg.OrderID] == payment.HoldCaptured && len(ps) == 1 && ps[0].Status == paymentprovider.StatusSucceeded
		effects := captured && reservations[sg.OrderID] == inventory.StatusCommitted && shipments[sg.OrderID] == shipping.StatusCreated
		if (sg.Status == orchestrator.StatusCompleted) != effects {
			r.Violations = append(r.Violations, Violation{"saga " + sg.ID, fmt.Sprintf("%s (hold %q, provider %v, reservation %q, shipment %q)",
				sg.Status, holds[sg.OrderID], statuses(ps), reservations[sg.OrderID], shipments[sg.OrderID])})
		}
		if sg.Status == orchestrator.StatusCompleted {
			completed++
		}
	}
	r.Summary = fmt.Sprintf("%d completed", completed)
	return r
}

// CompensatedUndone checks that nothing a compensated saga did is left:
// the hold released, expired or refunded (or never placed), no money taken
// or held at the provider, the stock released and the shipment cancelled
// (or never booked).
func CompensatedUndone(s Snapshot) Result {
	r := Result{Check: "COMPENSATED ⇒ hold released or refunded, stock released, shipment cancelled"}
	holds, shipments, reservations := holdsByOrder(s), shipmentsByOrder(s), reservationsByOrder(s)
	compensated := 0
	for _, sg := range s.Sagas {
		if sg.Status != orchestrator.StatusCompensated {
			continue
		}
		compensated++
		bad := func(problem string, args ...any) {
			r.Violations = append(r.Violations, Violation{"saga " + sg.ID, fmt.Sprintf(problem, args...)})
		}
		switch h := holds[sg.OrderID]; h {
		case "", payment.HoldDeclined, payment.HoldReleased, payment.HoldExpired, payment.HoldRefunded, payment.HoldVoid:
		default:
			bad("compensated but hold %s", h)
		}
		for _, p := range s.Provider[sg.OrderID] {
			switch p.Status {
			case paymentprovider.StatusSucceeded, paymentprovider.StatusAuthorized, paymentprovider.StatusProcessing, paymentprovider.StatusPending:
				bad("compensated but provider payment %s is %s", p.ID, p.Status)
			}
		}
		switch st := reservations[sg.OrderID]; st {
		case "", inventory.StatusReleased, inventory.StatusRejected:
		default:
			bad("compensated but reservation %s", st)
		}
		switch st := shipments[sg.OrderID]; st {
		case "", shipping.StatusDeclined, shipping.StatusCancelled:
		default:
			bad("compensated but shipment %s", st)
		}
	}
	r.Summary = fmt.Sprintf("%d compensated", compensated)
	return r
}

// FailedReviewed checks that every FAILED saga (a compensation that ran
// out of attempts) has a review entry an operator can resolve.
func FailedReviewed(s Snapshot) Result {
	r := Result{Check: "FAILED sagas only with a review entry"}
	failed := 0
	for _, sg := range s.Sagas {
		if sg.Status != orchestrator.StatusFailed {
			continue
		}
		failed++
		if !sg.Reviewed {
			r.Violations = append(r.Violations, Violation{"saga " + sg.ID, "FAILED without a review entry"})
		}
	}
	r.Summary = fmt.Sprintf("%d FAILED", failed)
	return r
}

func sagaTerminal(st orchestrator.Status) bool {
	return st == orchestrator.StatusCompleted || st == orchestrator.StatusCompensated || st == orchestrator.StatusFailed
}

func orchestratedOrders(s Snapshot) int {
	n := 0
	for _, o := range s.Orders {
		if o.Flow == order.FlowOrchestrated {
			n++
		}
	}
	return n
}

func sagasByOrder(s Snapshot) map[string]SagaRun {
	m := make(map[string]SagaRun, len(s.Sagas))
	for _, sg := range s.Sagas {
		m[sg.OrderID] = sg
	}
	return m
}

func holdsByOrder(s Snapshot) map[string]payment.HoldStatus {
	return byOrder(s.Holds, func(h Hold) (string, payment.HoldStatus) { return h.OrderID, h.Status })
}

func shipmentsByOrder(s Snapshot) map[string]shipping.Status {
	return byOrder(s.Shipments, func(sh Shipment) (string, shipping.Status) { return sh.OrderID, sh.Status })
}
