package shipping_test

import (
	"testing"
	"time"

	"github.com/concordhq/concord/services/shipping"
)

func TestNext(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Second), now.Add(-time.Second)
	cases := []struct {
		name string
		s    shipping.State
		want shipping.Action
	}{
		{"new shipment is created", shipping.State{Status: shipping.StatusPending, CreateDeadline: later}, shipping.Create},
		{"an earlier call is looked up before another", shipping.State{Status: shipping.StatusPending, CreateCalls: 1, CreateDeadline: later}, shipping.Lookup},
		{"budget spent gives up", shipping.State{Status: shipping.StatusPending, CreateCalls: 2, CreateDeadline: earlier}, shipping.GiveUpCreate},
		{"budget ends at the deadline itself", shipping.State{Status: shipping.StatusPending, CreateDeadline: now}, shipping.GiveUpCreate},
		{"cancel before any call settles without the carrier",
			shipping.State{Status: shipping.StatusPending, CancelStatus: shipping.CancelPending, CreateDeadline: later}, shipping.SettleCancelled},
		{"cancel after a call looks the key up, even past the create budget",
			shipping.State{Status: shipping.StatusPending, CancelStatus: shipping.CancelPending, CreateCalls: 1, CreateDeadline: earlier, CancelDeadline: later}, shipping.Lookup},
		{"cancel of a pending shipment gives up at its own deadline",
			shipping.State{Status: shipping.StatusPending, CancelStatus: shipping.CancelPending, CreateCalls: 1, CreateDeadline: later, CancelDeadline: now}, shipping.GiveUpCancel},
		{"our own voiding of a pending shipment keeps looking",
			shipping.State{Status: shipping.StatusPending, CancelStatus: shipping.CancelPending, CreateCalls: 1, CancelDeadline: earlier, InternalCancel: true}, shipping.Lookup},
		{"created and no cancel waits", shipping.State{Status: shipping.StatusCreated}, shipping.Wait},
		{"created and cancel asked cancels", shipping.State{Status: shipping.StatusCreated, CancelStatus: shipping.CancelPending, CancelDeadline: later}, shipping.Cancel},
		{"cancel budget spent gives up", shipping.State{Status: shipping.StatusCreated, CancelStatus: shipping.CancelPending, CancelDeadline: now}, shipping.GiveUpCancel},
		{"our own voiding has no budget",
			shipping.State{Status: shipping.StatusCreated, CancelStatus: shipping.CancelPending, CancelDeadline: earlier, InternalCancel: true}, shipping.Cancel},
		{"failed cancel waits for a new command", shipping.State{Status: shipping.StatusCreated, CancelStatus: shipping.CancelFailed}, shipping.Wait},
		{"done cancel waits", shipping.State{Status: shipping.StatusCancelled, CancelStatus: shipping.CancelDone}, shipping.Wait},
		{"declined waits", shipping.State{Status: shipping.StatusDeclined}, shipping.Wait},
		{"cancel of declined settles", shipping.State{Status: shipping.StatusDeclined, CancelStatus: shipping.CancelPending}, shipping.SettleCancelled},
		{"cancel of cancelled settles", shipping.State{Status: shipping.StatusCancelled, CancelStatus: shipping.CancelPending}, shipping.SettleCancelled},
		{"unknown status waits", shipping.State{Status: "WHAT", CancelStatus: shipping.CancelPending}, shipping.Wait},
	}
	for _, c := range cases {
		if got := shipping.Next(c.s, now); got != c.want {
			t.Errorf("%s: Next = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestCompensationKeyIsTheSeeds(t *testing.T) {
	if k := shipping.CompensationKey("saga-1:create_shipment"); k != "saga-1:create_shipment_compensate" {
		t.Fatalf("CompensationKey = %q", k)
	}
}

func TestActionsHaveNames(t *testing.T) {
	seen := map[string]bool{}
	for a := shipping.Wait; a <= shipping.GiveUpCancel; a++ {
		n := a.String()
		if n == "unknown" || seen[n] {
			t.Errorf("action %d named %q", a, n)
		}
		seen[n] = true
	}
	if shipping.Action(99).String() != "unknown" {
		t.Error("out-of-range action has a name")
	}
}
