package orchestrator_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/orchestrator"
)

var (
	t0     = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	policy = orchestrator.Policy{Timeout: 10 * time.Second, Attempts: 2, CompensationAttempts: 3, BackoffMin: time.Second, BackoffMax: 4 * time.Second}
	def    = orchestrator.Checkout(policy)
)

// answer is what a fake participant says to a command.
type answer struct {
	ok        bool
	silent    bool // no reply: the deadline passes
	retryable bool
}

// run drives a saga until it is terminal, answering each command with
// answers[key][attempt-1] (default: success), and returns the saga and
// the commands sent, as "kind step #attempt".
func run(t *testing.T, answers map[string][]answer) (orchestrator.Saga, []string, []string) {
	t.Helper()
	now := t0
	d := orchestrator.Start(def, "s1", now)
	var sent, exhausted []string
	for n := range 100 {
		if len(d.Commands) > 0 {
			d.Saga.CommandID = fmt.Sprint("cmd-", n) // the store's outbox event id
		}
		sent = append(sent, cmdNames(d.Commands)...)
		exhausted = append(exhausted, d.Exhausted...)
		s := d.Saga
		if s.Status.Terminal() {
			if len(d.Commands) > 0 {
				t.Fatalf("terminal saga sends %v", d.Commands)
			}
			return s, sent, exhausted
		}
		if len(d.Commands) == 0 { // waiting out a backoff
			now = s.Deadline
			d = orchestrator.OnDeadline(def, s, now)
			continue
		}
		c := d.Commands[len(d.Commands)-1]
		a := answer{ok: true}
		if as := answers[string(c.Kind)+" "+c.Step]; c.Attempt <= len(as) {
			a = as[c.Attempt-1]
		}
		if a.silent {
			now = s.Deadline
			d = orchestrator.OnDeadline(def, s, now)
			continue
		}
		now = now.Add(time.Second)
		r := reply(s, c, a)
		var err error
		if d, err = orchestrator.OnReply(def, s, r, now); err != nil {
			t.Fatal(err)
		}
		if !d.Changed {
			t.Fatalf("reply to %v absorbed: %s", c, d.Absorbed)
		}
	}
	t.Fatal("saga did not end")
	return orchestrator.Saga{}, nil, nil
}

func reply(s orchestrator.Saga, c orchestrator.Command, a answer) orchestrator.Reply {
	sd, _, _ := def.Step(c.Step)
	typ := sd.ExecuteType
	if c.Kind == orchestrator.Compensate {
		typ = sd.CompensateType
	}
	r := orchestrator.Reply{Step: c.Step, CommandType: typ, Key: c.Key, Succeeded: a.ok, Retryable: a.retryable, CommandID: s.CommandID}
	if !a.ok {
		r.Reason = "nope"
	}
	if c.Step == orchestrator.StepReserveCredit && a.ok {
		r.Details = map[string]string{orchestrator.CtxProviderPaymentID: "pi_1"}
	}
	return r
}

func cmdNames(cs []orchestrator.Command) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c.Kind)+" "+c.Step+" #"+string(rune('0'+c.Attempt)))
	}
	return out
}

func stepStatuses(s orchestrator.Saga) []string {
	var out []string
	for _, st := range s.Steps {
		out = append(out, st.Name+"="+string(st.Status))
	}
	return out
}

func TestHappyPathRunsEveryStepOnceAndCompletes(t *testing.T) {
	s, sent, _ := run(t, nil)
	if s.Status != orchestrator.StatusCompleted || s.CompletedAt.IsZero() || !s.Deadline.IsZero() {
		t.Fatalf("saga %+v", s)
	}
	want := []string{"execute reserve_credit #1", "execute reserve_inventory #1", "execute create_shipment #1", "execute capture_payment #1"}
	if !slices.Equal(sent, want) {
		t.Fatalf("sent %v, want %v", sent, want)
	}
	if s.Context[orchestrator.CtxProviderPaymentID] != "pi_1" {
		t.Fatalf("context %v", s.Context)
	}
}

// A refusal at each step undoes exactly the steps executed before it, in
// reverse order, and nothing else.
func TestAFailureAtEachStepCompensatesExactlyTheExecutedStepsInReverse(t *testing.T) {
	cases := []struct {
		step  string
		comps []string
		steps []string
	}{
		{orchestrator.StepReserveCredit, nil, []string{"reserve_credit=failed"}},
		{orchestrator.StepReserveInventory, []string{"compensate reserve_credit #1"},
			[]string{"reserve_credit=compensated", "reserve_inventory=failed"}},
		{orchestrator.StepCreateShipment, []string{"compensate reserve_inventory #1", "compensate reserve_credit #1"},
			[]string{"reserve_credit=compensated", "reserve_inventory=compensated", "create_shipment=failed"}},
		{orchestrator.StepCapturePayment, []string{"compensate create_shipment #1", "compensate reserve_inventory #1", "compensate reserve_credit #1"},
			[]string{"reserve_credit=compensated", "reserve_inventory=compensated", "create_shipment=compensated", "capture_payment=failed"}},
	}
	for _, c := range cases {
		t.Run(c.step, func(t *testing.T) {
			s, sent, _ := run(t, map[string][]answer{"execute " + c.step: {{ok: false}}})
			if s.Status != orchestrator.StatusCompensated || s.FailedStep != c.step {
				t.Fatalf("status %s failed step %q", s.Status, s.FailedStep)
			}
			var comps []string
			for _, x := range sent {
				if x[:len("compensate")] == "compensate" {
					comps = append(comps, x)
				}
			}
			if !slices.Equal(comps, c.comps) {
				t.Fatalf("compensations %v, want %v", comps, c.comps)
			}
			if got := stepStatuses(s); !slices.Equal(got, c.steps) {
				t.Fatalf("steps %v, want %v", got, c.steps)
			}
		})
	}
}

func TestACompensationThatFailsThenSucceedsIsRetriedWithBackoffUnderItsKey(t *testing.T) {
	now := t0
	d := orchestrator.Start(def, "s1", now)
	d, _ = orchestrator.OnReply(def, d.Saga, reply(d.Saga, d.Commands[0], answer{ok: true}), now)
	d, _ = orchestrator.OnReply(def, d.Saga, reply(d.Saga, d.Commands[0], answer{ok: false}), now) // inventory refuses
	comp := d.Commands[0]
	if comp.Kind != orchestrator.Compensate || comp.Key != "s1:reserve_credit_compensate" {
		t.Fatalf("compensation %+v", comp)
	}
	// Two failures: each waits longer, then the same key goes out again.
	var waits []time.Duration
	for i := range 2 {
		d, _ = orchestrator.OnReply(def, d.Saga, reply(d.Saga, comp, answer{ok: false}), now)
		if len(d.Commands) != 0 || d.Saga.AwaitingReply {
			t.Fatalf("failure %d resends at once: %+v", i, d)
		}
		waits = append(waits, d.Saga.Deadline.Sub(now))
		if early := orchestrator.OnDeadline(def, d.Saga, d.Saga.Deadline.Add(-time.Millisecond)); early.Changed || early.Absorbed != orchestrator.AbsorbedNotDue {
			t.Fatalf("deadline acted early: %+v", early)
		}
		now = d.Saga.Deadline
		d = orchestrator.OnDeadline(def, d.Saga, now)
		if len(d.Commands) != 1 || d.Commands[0].Key != comp.Key || d.Commands[0].Attempt != i+2 {
			t.Fatalf("retry %d: %+v", i, d.Commands)
		}
		comp = d.Commands[0]
	}
	if !slices.Equal(waits, []time.Duration{time.Second, 2 * time.Second}) {
		t.Fatalf("backoff %v", waits)
	}
	d, _ = orchestrator.OnReply(def, d.Saga, reply(d.Saga, comp, answer{ok: true}), now)
	if d.Saga.Status != orchestrator.StatusCompensated || len(d.Exhausted) != 0 {
		t.Fatalf("saga %s exhausted %v", d.Saga.Status, d.Exhausted)
	}
}

func TestACompensationThatNeverSucceedsFailsTheSagaAndStillUndoesTheRest(t *testing.T) {
	fail := []answer{{ok: false}, {ok: false}, {ok: false}}
	s, sent, exhausted := run(t, map[string][]answer{
		"execute capture_payment":      {{ok: false}},
		"compensate reserve_inventory": fail,
	})
	if s.Status != orchestrator.StatusFailed || !slices.Equal(exhausted, []string{orchestrator.StepReserveInventory}) {
		t.Fatalf("status %s exhausted %v", s.Status, exhausted)
	}
	want := []string{"reserve_credit=compensated", "reserve_inventory=compensation_failed", "create_shipment=compensated", "capture_payment=failed"}
	if got := stepStatuses(s); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if n := countPrefix(sent, "compensate reserve_inventory"); n != policy.CompensationAttempts {
		t.Fatalf("inventory compensation sent %d times, want %d", n, policy.CompensationAttempts)
	}
	if s.Error == "" || s.CompletedAt.IsZero() {
		t.Fatalf("saga error %q completed %v", s.Error, s.CompletedAt)
	}
}

func countPrefix(xs []string, p string) int {
	n := 0
	for _, x := range xs {
		if len(x) >= len(p) && x[:len(p)] == p {
			n++
		}
	}
	return n
}

// A reply that never comes: the command is sent again under the same key;
// out of attempts, the step fails, and since it may have taken effect it
// is compensated with the steps before it.
func TestAStepWithoutReplyIsResentThenFailedAndCompensatedAsUncertain(t *testing.T) {
	s, sent, _ := run(t, map[string][]answer{"execute create_shipment": {{silent: true}, {silent: true}}})
	if s.Status != orchestrator.StatusCompensated {
		t.Fatalf("status %s", s.Status)
	}
	want := []string{"execute reserve_credit #1", "execute reserve_inventory #1", "execute create_shipment #1", "execute create_shipment #2",
		"compensate create_shipment #1", "compensate reserve_inventory #1", "compensate reserve_credit #1"}
	if !slices.Equal(sent, want) {
		t.Fatalf("sent %v\nwant %v", sent, want)
	}
	if st := s.Steps[2]; !st.Uncertain || st.Status != orchestrator.StepCompensated {
		t.Fatalf("shipment step %+v", st)
	}
}

func TestARetryableRefusalIsRetriedAndAFinalOneFails(t *testing.T) {
	s, sent, _ := run(t, map[string][]answer{"execute reserve_credit": {{ok: false, retryable: true}, {ok: true}}})
	if s.Status != orchestrator.StatusCompleted || countPrefix(sent, "execute reserve_credit") != 2 {
		t.Fatalf("status %s sent %v", s.Status, sent)
	}
	s, _, _ = run(t, map[string][]answer{"execute reserve_credit": {{ok: false, retryable: true}, {ok: false, retryable: true}}})
	if s.Status != orchestrator.StatusCompensated || s.Steps[0].Uncertain {
		t.Fatalf("status %s step %+v", s.Status, s.Steps[0])
	}
}

func TestRepeatedEarlyAndLateRepliesChangeNothing(t *testing.T) {
	now := t0
	d := orchestrator.Start(def, "s1", now)
	first := d.Commands[0]
	okReply := reply(d.Saga, first, answer{ok: true})
	d, _ = orchestrator.OnReply(def, d.Saga, okReply, now)
	s := d.Saga
	inv := d.Commands[0]

	cases := []struct {
		name string
		r    orchestrator.Reply
		want string
	}{
		{"the same reply again", okReply, orchestrator.AbsorbedDuplicate},
		{"a failure for an executed step", reply(s, first, answer{ok: false}), orchestrator.AbsorbedDuplicate},
		{"a reply for a step not started", reply(s, orchestrator.Command{Step: orchestrator.StepCapturePayment, Kind: orchestrator.Execute,
			Key: "s1:capture_payment"}, answer{ok: true}), orchestrator.AbsorbedOutOfOrder},
		{"a compensation reply before its command", reply(s, orchestrator.Command{Step: orchestrator.StepReserveCredit, Kind: orchestrator.Compensate,
			Key: "s1:reserve_credit_compensate"}, answer{ok: true}), orchestrator.AbsorbedOutOfOrder},
	}
	for _, c := range cases {
		got, err := orchestrator.OnReply(def, s, c.r, now)
		if err != nil || got.Changed || got.Absorbed != c.want || len(got.Commands) != 0 {
			t.Errorf("%s: err %v changed %v absorbed %q commands %v, want %q", c.name, err, got.Changed, got.Absorbed, got.Commands, c.want)
		}
	}
	// Terminal sagas absorb everything.
	d, _ = orchestrator.OnReply(def, s, reply(s, inv, answer{ok: false}), now)
	d, _ = orchestrator.OnReply(def, d.Saga, reply(d.Saga, d.Commands[0], answer{ok: true}), now)
	if d.Saga.Status != orchestrator.StatusCompensated {
		t.Fatal(d.Saga.Status)
	}
	if got, _ := orchestrator.OnReply(def, d.Saga, okReply, now); got.Changed || got.Absorbed != orchestrator.AbsorbedTerminal {
		t.Fatalf("terminal saga: %+v", got)
	}
	if got := orchestrator.OnDeadline(def, d.Saga, now.Add(time.Hour)); got.Changed || got.Absorbed != orchestrator.AbsorbedTerminal {
		t.Fatalf("terminal saga deadline: %+v", got)
	}
}

func TestALateSuccessOfAStepGivenUpIsAbsorbed(t *testing.T) {
	now := t0
	d := orchestrator.Start(def, "s1", now)
	c := d.Commands[0]
	for range policy.Attempts {
		now = d.Saga.Deadline
		d = orchestrator.OnDeadline(def, d.Saga, now)
	}
	if d.Saga.Steps[0].Status != orchestrator.StepCompensating || !d.Saga.Steps[0].Uncertain {
		t.Fatalf("step %+v", d.Saga.Steps[0])
	}
	got, err := orchestrator.OnReply(def, d.Saga, reply(d.Saga, c, answer{ok: true}), now)
	if err != nil || got.Changed || got.Absorbed != orchestrator.AbsorbedDuplicate {
		t.Fatalf("late success while compensating: %+v %v", got, err)
	}
	d, _ = orchestrator.OnReply(def, d.Saga, reply(d.Saga, d.Commands[0], answer{ok: true}), now)
	got, _ = orchestrator.OnReply(def, d.Saga, reply(d.Saga, c, answer{ok: true}), now)
	if got.Changed || got.Absorbed != orchestrator.AbsorbedTerminal {
		t.Fatalf("late success after the end: %+v", got)
	}
}

func TestWrongRepliesAreErrors(t *testing.T) {
	d := orchestrator.Start(def, "s1", t0)
	s := d.Saga
	good := reply(s, d.Commands[0], answer{ok: true})
	for name, mutate := range map[string]func(*orchestrator.Reply){
		"unknown step":  func(r *orchestrator.Reply) { r.Step = "teleport" },
		"foreign key":   func(r *orchestrator.Reply) { r.Key = "s2:reserve_credit" },
		"other command": func(r *orchestrator.Reply) { r.CommandType = contract.TypeInventoryReserveStock },
		"no compensator": func(r *orchestrator.Reply) {
			r.Step, r.Key = orchestrator.StepCapturePayment, "s1:capture_payment_compensate"
		},
	} {
		r := good
		mutate(&r)
		got, err := orchestrator.OnReply(def, s, r, t0)
		want := orchestrator.ErrCommandMismatch
		if name == "unknown step" {
			want = orchestrator.ErrUnknownStep
		}
		if !errors.Is(err, want) || got.Changed {
			t.Errorf("%s: err %v changed %v", name, err, got.Changed)
		}
	}
}

func TestBuildFillsTheCommandsFromTheInputAndTheReplies(t *testing.T) {
	in := contract.SagaCheckoutRequestedV1{SagaID: "s1", OrderID: "s1", CustomerID: "c1", Currency: "USD", TotalAmount: 300,
		Items:           []contract.SagaCheckoutRequestedV1Item{{SKU: "A", Quantity: 3, UnitPrice: 100}},
		ShippingAddress: &contract.SagaCheckoutRequestedV1ShippingAddress{Line1: "1 Main", City: "X", PostalCode: "1", Country: "US"}}
	data, _ := json.Marshal(in)
	s := orchestrator.Saga{ID: "s1", Context: map[string]string{orchestrator.CtxProviderPaymentID: "pi_9"}, Error: "create_shipment failed: nope"}
	p, err := orchestrator.Build(def, s, data, orchestrator.Command{Step: orchestrator.StepReserveCredit, Order: 0, Kind: orchestrator.Compensate,
		Key: orchestrator.CompensateKey("s1", orchestrator.StepReserveCredit), Attempt: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := contract.PaymentCancelHoldV1{SagaID: "s1", Step: "reserve_credit", IdempotencyKey: "s1:reserve_credit_compensate", Attempt: 2, OrderID: "s1",
		HoldKey: "s1:reserve_credit", ProviderPaymentID: "pi_9", Amount: 300, Currency: "USD", Reason: "create_shipment failed: nope"}
	if p != want {
		t.Fatalf("got %+v\nwant %+v", p, want)
	}
	noAddr := in
	noAddr.ShippingAddress = nil
	data, _ = json.Marshal(noAddr)
	if _, err := orchestrator.CheckoutInput(data); !errors.Is(err, orchestrator.ErrBadCheckout) {
		t.Fatalf("no address: %v", err)
	}
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
}

// A failure answers one send: repeated, or answering an earlier send, it
// must not count as another failed attempt (the compensation would be
// given up after fewer sends than its policy allows).
func TestAFailureReplyCountsOnlyForTheSendItAnswers(t *testing.T) {
	now := t0
	d := orchestrator.Start(def, "s1", now)
	d.Saga.CommandID = "c1"
	d, _ = orchestrator.OnReply(def, d.Saga, orchestrator.Reply{Step: "reserve_credit", CommandType: contract.TypePaymentAuthorizeHold,
		Key: "s1:reserve_credit", Retryable: true, CommandID: "c1"}, now)
	if !d.Changed || d.Saga.AwaitingReply {
		t.Fatalf("first failure: %+v", d)
	}
	again := orchestrator.Reply{Step: "reserve_credit", CommandType: contract.TypePaymentAuthorizeHold, Key: "s1:reserve_credit", Retryable: true, CommandID: "c1"}
	if got, _ := orchestrator.OnReply(def, d.Saga, again, now); got.Changed || got.Absorbed != orchestrator.AbsorbedDuplicate {
		t.Fatalf("the same failure during the backoff: %+v", got)
	}
	d = orchestrator.OnDeadline(def, d.Saga, d.Saga.Deadline)
	d.Saga.CommandID = "c2"
	if got, _ := orchestrator.OnReply(def, d.Saga, again, now); got.Changed || got.Absorbed != orchestrator.AbsorbedDuplicate {
		t.Fatalf("the first send's failure while the second is awaited: %+v", got)
	}
	// A participant that keeps its outcome answers a repeat with the first
	// command's id: while the repeat is awaited, that counts.
	d.Saga.Steps[0].FirstCommandID = "c1"
	if got, _ := orchestrator.OnReply(def, d.Saga, again, now); !got.Changed || got.Saga.AwaitingReply {
		t.Fatalf("the repeat answered under the first command's id: %+v", got)
	}
	d.Saga.Steps[0].FirstCommandID = ""
	late := again
	late.Retryable, late.Succeeded = false, true
	if got, _ := orchestrator.OnReply(def, d.Saga, late, now); !got.Changed || got.Saga.Steps[0].Status != orchestrator.StepExecuted {
		t.Fatalf("a success answering the first send: %+v", got)
	}
}
