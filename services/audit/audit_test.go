package audit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/services/audit"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/orchestrator"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/shipping"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

const bound = time.Minute

// healthy is a quiet deployment that keeps every invariant: o1 confirmed
// (2 × SKU-A), o2 cancelled for a declined card, o3 cancelled out of stock,
// o4 confirmed after a repair command healed a dropped webhook; and three
// orchestrated orders: o5 completed (1 × SKU-A), o6 compensated after its
// shipment was cancelled, o7 failed with a review entry.
func healthy() (audit.Snapshot, map[string]int64) {
	resolved := t0.Add(time.Minute)
	s := audit.Snapshot{
		Orders: []audit.Order{
			{ID: "o1", Status: order.StatusConfirmed, CreatedAt: t0, TerminalAt: t0.Add(time.Second), Items: []inventory.Line{{SKU: "SKU-A", Quantity: 2}}},
			{ID: "o2", Status: order.StatusCancelled, CreatedAt: t0, TerminalAt: t0.Add(time.Second), Items: []inventory.Line{{SKU: "SKU-A", Quantity: 1}}},
			{ID: "o3", Status: order.StatusCancelled, CreatedAt: t0, TerminalAt: t0.Add(time.Second), Items: []inventory.Line{{SKU: "SKU-B", Quantity: 9}}},
			{ID: "o4", Status: order.StatusConfirmed, CreatedAt: t0, TerminalAt: t0.Add(30 * time.Second), Items: []inventory.Line{{SKU: "SKU-B", Quantity: 1}}},
			{ID: "o5", Status: order.StatusConfirmed, Flow: order.FlowOrchestrated, CreatedAt: t0, TerminalAt: t0.Add(time.Second),
				Items: []inventory.Line{{SKU: "SKU-A", Quantity: 1}}},
			{ID: "o6", Status: order.StatusCancelled, Flow: order.FlowOrchestrated, CreatedAt: t0, TerminalAt: t0.Add(time.Second),
				Items: []inventory.Line{{SKU: "SKU-B", Quantity: 1}}},
			{ID: "o7", Status: order.StatusCancelled, Flow: order.FlowOrchestrated, CreatedAt: t0, TerminalAt: t0.Add(time.Second)},
		},
		Sagas: []audit.SagaRun{
			{ID: "o5", OrderID: "o5", Status: orchestrator.StatusCompleted},
			{ID: "o6", OrderID: "o6", Status: orchestrator.StatusCompensated},
			{ID: "o7", OrderID: "o7", Status: orchestrator.StatusFailed, Reviewed: true},
		},
		Holds: []audit.Hold{
			{OrderID: "o5", Status: payment.HoldCaptured},
			{OrderID: "o6", Status: payment.HoldReleased},
			{OrderID: "o7", Status: payment.HoldAuthorized},
		},
		Shipments: []audit.Shipment{{OrderID: "o5", Status: shipping.StatusCreated}, {OrderID: "o6", Status: shipping.StatusCancelled}},
		History:   []string{"e1", "e2", "e3"},
		Reservations: []audit.Reservation{
			{OrderID: "o1", Status: inventory.StatusCommitted},
			{OrderID: "o2", Status: inventory.StatusReleased},
			{OrderID: "o3", Status: inventory.StatusRejected},
			{OrderID: "o4", Status: inventory.StatusCommitted},
			{OrderID: "o5", Status: inventory.StatusCommitted},
			{OrderID: "o6", Status: inventory.StatusReleased},
		},
		Stock: []audit.Stock{{SKU: "SKU-A", Available: 2, Committed: 3}, {SKU: "SKU-B", Available: 4, Committed: 1}},
		Payments: []audit.Payment{
			{ID: 1, OrderID: "o1", Status: payment.StatusPaid},
			{ID: 2, OrderID: "o2", Status: payment.StatusFailed},
			{ID: 4, OrderID: "o4", Status: payment.StatusPaid},
		},
		Transitions: []audit.Transition{
			{PaymentID: 1, To: payment.StatusPaid, Source: "create"},
			{PaymentID: 2, To: payment.StatusFailed, Source: "create"},
			{PaymentID: 4, To: payment.StatusPaid, Source: reconciler.RepairSource(7)},
		},
		Events: []audit.Event{
			{Service: "order-svc", AggregateID: "o1", Type: "order.created"},
			{Service: "order-svc", AggregateID: "o1", Type: "order.confirmed"},
			{Service: "order-svc", AggregateID: "o2", Type: "order.cancelled"},
			{Service: "inventory-svc", AggregateID: "o1", Type: "inventory.reserved"},
			{Service: "inventory-svc", AggregateID: "o2", Type: "inventory.reserved"},
			{Service: "inventory-svc", AggregateID: "o2", Type: "inventory.released"},
			{Service: "payment-svc", AggregateID: "o1", Type: "payment.processed"},
			{Service: "payment-svc", AggregateID: "o2", Type: "payment.failed"},
			// Replies repeat by design: the first send and a resend of
			// one command, and the compensation's.
			{Service: "inventory-svc", AggregateID: "o6", Type: "saga.step_replied"},
			{Service: "inventory-svc", AggregateID: "o6", Type: "saga.step_replied"},
			{Service: "inventory-svc", AggregateID: "o6", Type: "saga.step_replied"},
		},
		Findings: []reconciler.Finding{
			{ID: 7, PaymentID: 4, Kind: reconciler.KindMissedSuccess, Verdict: reconciler.Repairable, ResolvedAt: &resolved, Resolution: reconciler.ResolutionRepaired},
		},
		Provider: map[string][]audit.ProviderPayment{
			"o1": {{ID: "pi_1", Status: paymentprovider.StatusSucceeded}},
			"o2": {{ID: "pi_2", Status: paymentprovider.StatusDeclined}},
			"o4": {{ID: "pi_4", Status: paymentprovider.StatusSucceeded}},
			"o5": {{ID: "pi_5", Status: paymentprovider.StatusSucceeded}},
			"o6": {{ID: "pi_6", Status: paymentprovider.StatusCanceled}},
			"o7": {{ID: "pi_7", Status: paymentprovider.StatusAuthorized}},
		},
	}
	return s, map[string]int64{"SKU-A": 5, "SKU-B": 5}
}

func all(s audit.Snapshot, stocked map[string]int64) []audit.Result {
	return append(audit.Saga(s, bound, stocked), audit.Reconciliation(s)...)
}

func TestAHealthyDeploymentKeepsEveryInvariant(t *testing.T) {
	s, stocked := healthy()
	for _, r := range all(s, stocked) {
		if !r.Holds() {
			t.Errorf("%s: %s", r.Check, r.Detail())
		}
	}
}

// Each case breaks one invariant of the healthy deployment; the check named
// must report a violation about subject.
func TestEachCheckFindsItsViolation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		check   string
		subject string
		problem string
		breakIt func(s *audit.Snapshot, stocked map[string]int64)
	}{
		{"an order still in flight", "every order terminal", "o1", "still PENDING", func(s *audit.Snapshot, _ map[string]int64) {
			s.Orders[0].Status, s.Orders[0].TerminalAt = order.StatusPending, time.Time{}
			s.Events = s.Events[:1]
			s.Reservations[0].Status = inventory.StatusHeld
			s.Stock[0].Reserved, s.Stock[0].Committed = 2, 0
			s.Payments[0].Status = payment.StatusPending
			s.Provider["o1"][0].Status = paymentprovider.StatusProcessing
		}},
		{"an order slower than the bound", "every order terminal", "o4", "took 2m0s", func(s *audit.Snapshot, _ map[string]int64) {
			s.Orders[3].TerminalAt = t0.Add(2 * time.Minute)
		}},
		{"confirmed without a provider payment", "confirmed ⇔", "o1", `provider []`, func(s *audit.Snapshot, _ map[string]int64) {
			delete(s.Provider, "o1")
		}},
		{"confirmed with stock only reserved", "confirmed ⇔", "o1", `reservation "HELD"`, func(s *audit.Snapshot, _ map[string]int64) {
			s.Reservations[0].Status = inventory.StatusHeld
			s.Stock[0].Reserved, s.Stock[0].Committed = 2, 0
			s.Orders[0].Status = order.StatusConfirmed
			// StockConserved counts o1's units as bought; keep it out of this case.
			s.Orders[0].Items = nil
		}},
		{"paid everywhere but not confirmed", "confirmed ⇔", "o4", "CANCELLED", func(s *audit.Snapshot, _ map[string]int64) {
			s.Orders[3].Status = order.StatusCancelled
			s.Orders[3].Items = []inventory.Line{{SKU: "SKU-B", Quantity: 1}}
		}},
		{"two provider payments for one order", "confirmed ⇔", "o2", "2 provider payments", func(s *audit.Snapshot, _ map[string]int64) {
			s.Provider["o2"] = append(s.Provider["o2"], audit.ProviderPayment{ID: "pi_2b", Status: paymentprovider.StatusDeclined})
		}},
		{"cancelled but charged at the provider", "cancelled ⇒", "o2", "provider payment pi_2 is succeeded", func(s *audit.Snapshot, _ map[string]int64) {
			s.Provider["o2"][0].Status = paymentprovider.StatusSucceeded
		}},
		{"cancelled with the reservation held", "cancelled ⇒", "o2", "reservation HELD", func(s *audit.Snapshot, _ map[string]int64) {
			s.Reservations[1].Status = inventory.StatusHeld
			s.Stock[0].Available, s.Stock[0].Reserved = 2, 1
		}},
		{"cancelled with the payment paid", "cancelled ⇒", "o2", "payment paid", func(s *audit.Snapshot, _ map[string]int64) {
			s.Payments[1].Status = payment.StatusPaid
			s.Provider["o2"][0].Status = paymentprovider.StatusRefunded
		}},
		{"negative stock", "stock never negative", "SKU-A", "negative", func(s *audit.Snapshot, _ map[string]int64) {
			s.Stock[0].Available, s.Stock[0].Reserved = -1, 4
		}},
		{"a unit lost", "stock never negative", "SKU-B", "4+0+1 ≠ initial 6", func(_ *audit.Snapshot, stocked map[string]int64) {
			stocked["SKU-B"] = 6
		}},
		{"committed more than confirmed orders bought", "stock never negative", "SKU-A", "committed 4, confirmed orders bought 3",
			func(s *audit.Snapshot, _ map[string]int64) { s.Stock[0].Available, s.Stock[0].Committed = 1, 4 }},
		{"a stocked SKU missing", "stock never negative", "SKU-C", "no such SKU", func(_ *audit.Snapshot, stocked map[string]int64) {
			stocked["SKU-C"] = 1
		}},
		{"an order with two outcomes", "no event applied twice", "order-svc o1", "outcome event recorded 2 times", func(s *audit.Snapshot, _ map[string]int64) {
			s.Events = append(s.Events, audit.Event{Service: "order-svc", AggregateID: "o1", Type: "order.cancelled"})
		}},
		{"an inventory event twice", "no event applied twice", "inventory-svc o2", "inventory.released event recorded 2 times", func(s *audit.Snapshot, _ map[string]int64) {
			s.Events = append(s.Events, audit.Event{Service: "inventory-svc", AggregateID: "o2", Type: "inventory.released"})
		}},
		{"a payment event twice", "no event applied twice", "payment-svc o1", "payment.processed event recorded 2 times", func(s *audit.Snapshot, _ map[string]int64) {
			s.Events = append(s.Events, audit.Event{Service: "payment-svc", AggregateID: "o1", Type: "payment.processed"})
		}},
		{"a history entry twice", "no event applied twice", "order-svc event e2", "history entry recorded 2 times", func(s *audit.Snapshot, _ map[string]int64) {
			s.History = append(s.History, "e2")
		}},
		{"a transition twice", "no event applied twice", "payment 1", "transition to paid recorded 2 times", func(s *audit.Snapshot, _ map[string]int64) {
			s.Transitions = append(s.Transitions, audit.Transition{PaymentID: 1, To: payment.StatusPaid, Source: "webhook:evt_1"})
		}},
		{"a saga still running", "every saga terminal", "saga o6", "still COMPENSATING", func(s *audit.Snapshot, _ map[string]int64) {
			s.Sagas[1].Status = orchestrator.StatusCompensating
		}},
		{"an orchestrated order without its saga", "every saga terminal", "o6", "has no saga", func(s *audit.Snapshot, _ map[string]int64) {
			s.Sagas = s.Sagas[:1]
		}},
		{"an orchestrated order confirmed after its saga compensated", "every saga terminal", "o6", "CONFIRMED, its saga COMPENSATED",
			func(s *audit.Snapshot, _ map[string]int64) {
				s.Orders[5].Status, s.Orders[5].Items = order.StatusConfirmed, nil
			}},
		{"completed without a shipment", "COMPLETED ⇔", "saga o5", `shipment ""`, func(s *audit.Snapshot, _ map[string]int64) {
			s.Shipments = s.Shipments[1:]
		}},
		{"completed with the hold only authorized", "COMPLETED ⇔", "saga o5", `hold "authorized"`, func(s *audit.Snapshot, _ map[string]int64) {
			s.Holds[0].Status = payment.HoldAuthorized
			s.Provider["o5"][0].Status = paymentprovider.StatusAuthorized
		}},
		{"every effect but compensated", "COMPLETED ⇔", "saga o5", "COMPENSATED", func(s *audit.Snapshot, _ map[string]int64) {
			s.Sagas[0].Status = orchestrator.StatusCompensated
			s.Orders[4].Status, s.Orders[4].Items = order.StatusCancelled, nil
		}},
		{"compensated with the hold still authorized", "COMPENSATED ⇒", "saga o6", "hold authorized", func(s *audit.Snapshot, _ map[string]int64) {
			s.Holds[1].Status = payment.HoldAuthorized
		}},
		{"compensated with money held at the provider", "COMPENSATED ⇒", "saga o6", "provider payment pi_6 is authorized",
			func(s *audit.Snapshot, _ map[string]int64) {
				s.Provider["o6"][0].Status = paymentprovider.StatusAuthorized
			}},
		{"compensated with the stock still reserved", "COMPENSATED ⇒", "saga o6", "reservation HELD", func(s *audit.Snapshot, _ map[string]int64) {
			s.Reservations[5].Status = inventory.StatusHeld
			s.Stock[1].Available, s.Stock[1].Reserved = 3, 1
		}},
		{"compensated with the shipment booked", "COMPENSATED ⇒", "saga o6", "shipment CREATED", func(s *audit.Snapshot, _ map[string]int64) {
			s.Shipments[1].Status = shipping.StatusCreated
		}},
		{"failed without a review entry", "FAILED sagas", "saga o7", "without a review entry", func(s *audit.Snapshot, _ map[string]int64) {
			s.Sagas[2].Reviewed = false
		}},
		{"two shipments for one saga", "no event applied twice", "shipping-svc o5", "shipment recorded 2 times", func(s *audit.Snapshot, _ map[string]int64) {
			s.Shipments = append(s.Shipments, audit.Shipment{OrderID: "o5", Status: shipping.StatusCancelled})
		}},
		{"two holds for one saga", "no event applied twice", "payment-svc o6", "authorization hold recorded 2 times", func(s *audit.Snapshot, _ map[string]int64) {
			s.Holds = append(s.Holds, audit.Hold{OrderID: "o6", Status: payment.HoldReleased})
		}},
		{"two provider payments for an orchestrated order", "confirmed ⇔", "o5", "2 provider payments", func(s *audit.Snapshot, _ map[string]int64) {
			s.Provider["o5"] = append(s.Provider["o5"], audit.ProviderPayment{ID: "pi_5b", Status: paymentprovider.StatusCanceled})
		}},
		{"a genuine event refused", "no event refused", "payment-svc o1", "order.cancelled refused: order_confirmed", func(s *audit.Snapshot, _ map[string]int64) {
			s.Refused = append(s.Refused, audit.Refused{Service: "payment-svc", EventType: "order.cancelled", OrderID: "o1", Reason: "order_confirmed"})
		}},
		{"a repairable finding left open", "every repairable drift healed", "finding 8", "still open", func(s *audit.Snapshot, _ map[string]int64) {
			s.Findings = append(s.Findings, reconciler.Finding{ID: 8, PaymentID: 1, Kind: reconciler.KindMissedSuccess, Verdict: reconciler.Repairable})
		}},
		{"a repair that bypassed the writer", "every repairable drift healed", "finding 7", "without its writer transition", func(s *audit.Snapshot, _ map[string]int64) {
			s.Transitions[2].Source = "webhook:evt_4"
		}},
		{"a finding left for review", "no drift left for review", "finding 9", "needs review", func(s *audit.Snapshot, _ map[string]int64) {
			s.Findings = append(s.Findings, reconciler.Finding{ID: 9, PaymentID: 2, Kind: "late_reversal", Verdict: reconciler.NeedsReview})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, stocked := healthy()
			tc.breakIt(&s, stocked)
			wantViolation(t, all(s, stocked), tc.check, tc.subject, tc.problem)
		})
	}
}

// wantViolation fails t unless the result whose check starts with check
// reports a violation of subject whose problem mentions problem.
func wantViolation(t *testing.T, rs []audit.Result, check, subject, problem string) {
	t.Helper()
	var got []audit.Violation
	checked := false
	for _, r := range rs {
		if strings.HasPrefix(r.Check, check) {
			checked, got = true, r.Violations
		}
	}
	if !checked {
		t.Fatalf("no check named %q", check)
	}
	for _, v := range got {
		if strings.HasPrefix(v.Subject, subject) && strings.Contains(v.Problem, problem) {
			return
		}
	}
	t.Errorf("%s: got %v; want a violation of %s mentioning %q", check, got, subject, problem)
}

func TestDetailShowsTheSummaryAndTheFirstThreeViolations(t *testing.T) {
	r := audit.Result{Summary: "4 checked", Violations: []audit.Violation{{"a", "x"}, {"b", "y"}, {"c", "z"}, {"d", "w"}}}
	if got, want := r.Detail(), "4 checked; 4 violations, e.g. a: x; b: y; c: z"; got != want {
		t.Errorf("Detail() = %q; want %q", got, want)
	}
	r = audit.Result{Violations: []audit.Violation{{"a", "x"}}}
	if got, want := r.Detail(), "a: x"; got != want {
		t.Errorf("Detail() = %q; want %q", got, want)
	}
}
