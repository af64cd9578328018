package audit

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentprovider"
)

// TerminalWithin checks that every order reached CONFIRMED or CANCELLED,
// and did so within bound of its creation.
func TerminalWithin(s Snapshot, bound time.Duration) Result {
	r := Result{Check: fmt.Sprintf("every order terminal within %s", bound)}
	open := 0
	var slowest time.Duration
	for _, o := range s.Orders {
		if !terminal(o.Status) {
			open++
			r.Violations = append(r.Violations, Violation{o.ID, fmt.Sprintf("still %s", o.Status)})
			continue
		}
		took := o.TerminalAt.Sub(o.CreatedAt)
		slowest = max(slowest, took)
		if took > bound {
			r.Violations = append(r.Violations, Violation{o.ID, fmt.Sprintf("took %s", took.Round(time.Millisecond))})
		}
	}
	r.Summary = fmt.Sprintf("%d not terminal, slowest took %s", open, slowest.Round(time.Millisecond))
	return r
}

func terminal(st order.Status) bool {
	return st == order.StatusConfirmed || st == order.StatusCancelled
}

// ConfirmedIffPaid checks that a choreographed order is confirmed exactly
// when its payment is paid, the provider holds one succeeded payment for it
// and its stock is committed; and that no order of either flow has more
// than one provider payment. Orchestrated orders pay with a hold instead:
// OrchestratedOutcomes checks them.
func ConfirmedIffPaid(s Snapshot) Result {
	r := Result{Check: "confirmed ⇔ succeeded provider payment and committed stock",
		Summary: fmt.Sprintf("%d orders checked against the provider", len(s.Orders))}
	payments, reservations := paymentsByOrder(s), reservationsByOrder(s)
	for _, o := range s.Orders {
		ps := s.Provider[o.ID]
		if len(ps) > 1 {
			r.Violations = append(r.Violations, Violation{o.ID, fmt.Sprintf("%d provider payments", len(ps))})
		}
		if o.Flow == order.FlowOrchestrated {
			continue
		}
		succeeded := len(ps) == 1 && ps[0].Status == paymentprovider.StatusSucceeded
		paidSide := payments[o.ID] == payment.StatusPaid && succeeded && reservations[o.ID] == inventory.StatusCommitted
		if (o.Status == order.StatusConfirmed) != paidSide {
			r.Violations = append(r.Violations, Violation{o.ID, fmt.Sprintf("%s (payment %q, provider %v, reservation %q)",
				o.Status, payments[o.ID], statuses(ps), reservations[o.ID])})
		}
	}
	return r
}

// CancelledWithoutCharge checks that a cancelled choreographed order has
// no money at the provider that was not refunded, no payment paid or
// pending, and no reservation still held or committed (OrchestratedOutcomes
// checks the orchestrated ones).
func CancelledWithoutCharge(s Snapshot) Result {
	r := Result{Check: "cancelled ⇒ no net charge and reservation released"}
	payments, reservations := paymentsByOrder(s), reservationsByOrder(s)
	for _, o := range s.Orders {
		if o.Status != order.StatusCancelled || o.Flow == order.FlowOrchestrated {
			continue
		}
		for _, p := range s.Provider[o.ID] {
			switch p.Status {
			case paymentprovider.StatusSucceeded, paymentprovider.StatusProcessing, paymentprovider.StatusPending:
				r.Violations = append(r.Violations, Violation{o.ID, fmt.Sprintf("cancelled but provider payment %s is %s", p.ID, p.Status)})
			}
		}
		if rs := reservations[o.ID]; rs != "" && rs != inventory.StatusReleased && rs != inventory.StatusRejected {
			r.Violations = append(r.Violations, Violation{o.ID, fmt.Sprintf("cancelled but reservation %s", rs)})
		}
		if ps := payments[o.ID]; ps == payment.StatusPaid || ps == payment.StatusPending {
			r.Violations = append(r.Violations, Violation{o.ID, fmt.Sprintf("cancelled but payment %s", ps)})
		}
	}
	return r
}

// StockConserved checks that no counter went negative, that every SKU still
// holds what was stocked (available + reserved + committed), and that what
// is committed is what the confirmed orders bought.
func StockConserved(s Snapshot, stocked map[string]int64) Result {
	r := Result{Check: "stock never negative; initial = available + reserved + committed"}
	bought := map[string]int64{}
	for _, o := range s.Orders {
		if o.Status == order.StatusConfirmed {
			for _, l := range o.Items {
				bought[l.SKU] += l.Quantity
			}
		}
	}
	var available, committed int64
	seen := map[string]bool{}
	for _, st := range s.Stock {
		seen[st.SKU] = true
		available += st.Available
		committed += st.Committed
		switch {
		case st.Available < 0 || st.Reserved < 0 || st.Committed < 0:
			r.Violations = append(r.Violations, Violation{st.SKU, fmt.Sprintf("negative: %d available, %d reserved, %d committed",
				st.Available, st.Reserved, st.Committed)})
		case st.Available+st.Reserved+st.Committed != stocked[st.SKU]:
			r.Violations = append(r.Violations, Violation{st.SKU, fmt.Sprintf("%d+%d+%d ≠ initial %d",
				st.Available, st.Reserved, st.Committed, stocked[st.SKU])})
		case st.Committed != bought[st.SKU]:
			r.Violations = append(r.Violations, Violation{st.SKU, fmt.Sprintf("committed %d, confirmed orders bought %d",
				st.Committed, bought[st.SKU])})
		}
	}
	for _, sku := range sortedKeys(stocked) {
		if !seen[sku] {
			r.Violations = append(r.Violations, Violation{sku, fmt.Sprintf("stocked %d, but inventory has no such SKU", stocked[sku])})
		}
	}
	r.Summary = fmt.Sprintf("%d SKUs, %d units committed, %d available", len(s.Stock), committed, available)
	return r
}

// AppliedOnce checks that no event was applied twice: at most one outcome
// event per order, one history entry per event, one event of each type per
// aggregate from inventory-svc and payment-svc, one hold and one shipment
// per saga, and one transition per payment and target status. A saga
// command's reply is not an effect: a participant answers every send of a
// command (the orchestrator sends again after a timeout) with the reply
// its first send got, so replies repeat by design; the holds, shipments,
// reservations and provider payments they stand for may not.
func AppliedOnce(s Snapshot) Result {
	r := Result{Check: "no event applied twice"}
	twice := func(subject, what string, n int) {
		r.Violations = append(r.Violations, Violation{subject, fmt.Sprintf("%s recorded %d times", what, n)})
	}
	type key struct{ service, aggregate, typ string }
	var events []key
	for _, e := range s.Events {
		switch {
		case e.Type == contract.TypeSagaStepReplied.String():
		case e.Service == "order-svc" && (e.Type == contract.TypeOrderConfirmed.String() || e.Type == contract.TypeOrderCancelled.String()):
			// An order ends once: confirmed or cancelled, never both.
			events = append(events, key{e.Service, e.AggregateID, "outcome event"})
		case e.Service == "inventory-svc" || e.Service == "payment-svc":
			events = append(events, key{e.Service, e.AggregateID, e.Type + " event"})
		}
	}
	for k, n := range repeated(events) {
		twice(k.service+" "+k.aggregate, k.typ, n)
	}
	for id, n := range repeated(s.History) {
		twice("order-svc event "+id, "history entry", n)
	}
	// One saga per order, so one hold and one shipment per order.
	var held, shipped []string
	for _, h := range s.Holds {
		held = append(held, h.OrderID)
	}
	for _, sh := range s.Shipments {
		shipped = append(shipped, sh.OrderID)
	}
	for id, n := range repeated(held) {
		twice("payment-svc "+id, "authorization hold", n)
	}
	for id, n := range repeated(shipped) {
		twice("shipping-svc "+id, "shipment", n)
	}
	type move struct {
		payment int64
		to      payment.Status
	}
	var moves []move
	for _, t := range s.Transitions {
		moves = append(moves, move{t.PaymentID, t.To})
	}
	for m, n := range repeated(moves) {
		twice(fmt.Sprintf("payment %d", m.payment), "transition to "+string(m.to), n)
	}
	slices.SortFunc(r.Violations, func(a, b Violation) int { return strings.Compare(a.String(), b.String()) })
	r.Summary = fmt.Sprintf("%d duplicate effects", len(r.Violations))
	return r
}

// repeated returns the values that occur more than once, with their counts.
func repeated[K comparable](ks []K) map[K]int {
	n := map[K]int{}
	for _, k := range ks {
		n[k]++
	}
	for k, c := range n {
		if c < 2 {
			delete(n, k)
		}
	}
	return n
}

// byOrder maps each row's order id to its status.
func byOrder[R any, S ~string](rows []R, of func(R) (string, S)) map[string]S {
	m := make(map[string]S, len(rows))
	for _, r := range rows {
		id, st := of(r)
		m[id] = st
	}
	return m
}

func paymentsByOrder(s Snapshot) map[string]payment.Status {
	return byOrder(s.Payments, func(p Payment) (string, payment.Status) { return p.OrderID, p.Status })
}

func reservationsByOrder(s Snapshot) map[string]inventory.Status {
	return byOrder(s.Reservations, func(r Reservation) (string, inventory.Status) { return r.OrderID, r.Status })
}

func statuses(ps []ProviderPayment) []string {
	s := []string{}
	for _, p := range ps {
		s = append(s, string(p.Status))
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
