package shipping_test

import (
	"errors"
	"testing"
	"time"

	"github.com/concordhq/concord/services/shipping"
)

var (
	t0     = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	budget = 10 * time.Second
)

func create(id string) shipping.CreateCommand {
	return shipping.CreateCommand{CommandID: id, Key: "s1:create_shipment", SagaID: "s1", Step: "create_shipment",
		Parcel: shipping.Parcel{OrderID: "o1"}}
}

func cancel(id string) shipping.CancelCommand {
	return shipping.CancelCommand{CommandID: id, Key: "s1:create_shipment_compensate", SagaID: "s1", Step: "create_shipment",
		OrderID: "o1", ShipmentKey: "s1:create_shipment"}
}

// want checks the replies a transition owed: command type, outcome and
// reason of each, in order.
func want(t *testing.T, what string, got []shipping.Reply, w ...string) {
	t.Helper()
	if len(got) != len(w)/3 {
		t.Fatalf("%s: %d replies %+v, want %v", what, len(got), got, w)
	}
	for i, r := range got {
		if r.CommandType != w[3*i] || string(r.Outcome) != w[3*i+1] || r.Reason != w[3*i+2] {
			t.Fatalf("%s: reply %d is %+v, want %v", what, i, r, w[3*i:3*i+3])
		}
	}
}

const (
	cr = shipping.CommandCreate
	cn = shipping.CommandCancel
	ok = string(shipping.Succeeded)
	no = string(shipping.Failed)
)

func TestCreatedIsAnsweredOnceAndARepeatGetsTheSameAnswer(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	if shipping.Next(s.State(), t0) != shipping.Create {
		t.Fatal("a new shipment is not created")
	}
	r := s.Created("shp_1", "TRK_1")
	want(t, "created", r, cr, ok, "")
	if r[0].ShipmentID != "shp_1" || r[0].TrackingNumber != "TRK_1" || r[0].CommandID != "c1" || r[0].IdempotencyKey != "s1:create_shipment" {
		t.Fatalf("reply %+v", r[0])
	}
	want(t, "created twice", s.Created("shp_2", "TRK_2"))
	again := s.OnCreate(create("c2"), t0, budget)
	want(t, "repeat", again, cr, ok, "")
	if again[0].CommandID != "c2" {
		t.Fatalf("the repeat's answer names %s, not the repeat", again[0].CommandID)
	}
	again[0].CommandID = "c1"
	if again[0] != r[0] {
		t.Fatalf("repeat answered %+v, first %+v", again[0], r[0])
	}
	// The compensation voids it.
	want(t, "cancel", s.OnCancel(cancel("x1"), t0, budget))
	if shipping.Next(s.State(), t0) != shipping.Cancel {
		t.Fatal("a created shipment's cancel does not call the carrier")
	}
	v := s.Voided()
	want(t, "voided", v, cn, ok, "")
	if v[0].ShipmentID != "shp_1" || v[0].IdempotencyKey != "s1:create_shipment_compensate" {
		t.Fatalf("cancel reply %+v", v[0])
	}
	want(t, "cancel repeat", s.OnCancel(cancel("x2"), t0, budget), cn, ok, "")
}

func TestARepeatWhileInFlightIsAnsweredOnceByTheOutcome(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	want(t, "repeat in flight", s.OnCreate(create("c2"), t0, budget))
	r := s.Declined("unsupported_postal_code")
	want(t, "declined", r, cr, no, "unsupported_postal_code")
	if r[0].CommandID != "c2" || r[0].Retryable {
		t.Fatalf("decline reply %+v", r[0])
	}
	want(t, "cancel of declined", s.OnCancel(cancel("x1"), t0, budget), cn, ok, "")
}

func TestCancelFirstRefusesTheLaterCreate(t *testing.T) {
	s, r := shipping.NewCancelledFirst(cancel("x1"))
	want(t, "cancel first", r, cn, ok, "")
	want(t, "late create", s.OnCreate(create("c1"), t0, budget), cr, no, shipping.ReasonCancelledFirst)
	want(t, "late create again", s.OnCreate(create("c2"), t0, budget), cr, no, shipping.ReasonCancelledFirst)
	if shipping.Next(s.State(), t0) != shipping.Wait {
		t.Fatal("a cancelled-first shipment has work")
	}
}

func TestCancelBeforeAnyCarrierCallSettlesBoth(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	want(t, "cancel", s.OnCancel(cancel("x1"), t0, budget), cr, no, shipping.ReasonCancelledFirst, cn, ok, "")
	if s.Status != shipping.StatusCancelled {
		t.Fatalf("status %s", s.Status)
	}
}

func TestCancelAfterACallLooksTheKeyUp(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	s.CreateCalls = 1
	want(t, "cancel", s.OnCancel(cancel("x1"), t0, budget))
	if shipping.Next(s.State(), t0) != shipping.Lookup {
		t.Fatal("a cancel after a call does not look the key up")
	}
	// The key found nothing: the shipment never existed and never will.
	want(t, "not found", s.NeverCreated(), cr, no, shipping.ReasonCancelledFirst, cn, ok, "")
}

func TestCancelThatFindsTheShipmentAnswersTheCreateThenVoids(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	s.CreateCalls = 1
	s.OnCancel(cancel("x1"), t0, budget)
	want(t, "found", s.Created("shp_1", "TRK_1"), cr, ok, "")
	if shipping.Next(s.State(), t0) != shipping.Cancel {
		t.Fatal("found shipment is not cancelled")
	}
	want(t, "voided", s.Voided(), cn, ok, "")
}

func TestShippedIsRefusedForGoodAndRepeatsGetTheRefusal(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	s.Created("shp_1", "TRK_1")
	s.OnCancel(cancel("x1"), t0, budget)
	want(t, "shipped", s.CancelRefused(shipping.ReasonAlreadyShipped), cn, no, shipping.ReasonAlreadyShipped)
	want(t, "repeat", s.OnCancel(cancel("x2"), t0, budget), cn, no, shipping.ReasonAlreadyShipped)
	if shipping.Next(s.State(), t0) != shipping.Wait {
		t.Fatal("a refused cancel is retried")
	}
}

func TestGivenUpCreateIsRetryableVoidsWhatItFindsAndAResendStartsOver(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	s.CreateCalls = 2
	late := t0.Add(budget)
	if shipping.Next(s.State(), late) != shipping.GiveUpCreate {
		t.Fatal("no give-up at the deadline")
	}
	r := s.GiveUpCreate()
	want(t, "give up", r, cr, no, shipping.ReasonCarrierUnavailable)
	if !r[0].Retryable {
		t.Fatal("give-up is not retryable")
	}
	// Our own voiding: no budget, no reply.
	if shipping.Next(s.State(), late.Add(time.Hour)) != shipping.Lookup {
		t.Fatal("the voiding does not look the key up")
	}
	want(t, "voiding finds nothing", s.NotFoundForCancel())
	// The orchestrator sends the create again: a new budget, and the key
	// is looked up before any call.
	want(t, "resend", s.OnCreate(create("c2"), late, budget))
	if s.Status != shipping.StatusPending || s.CancelStatus != shipping.CancelNone || shipping.Next(s.State(), late) != shipping.Lookup {
		t.Fatalf("resend did not start over: %+v", s)
	}
	want(t, "created", s.Created("shp_1", "TRK_1"), cr, ok, "")
}

// The voiding's lookup runs outside the row's lock: a create resent while
// it is in flight starts the create over, and the lookup's "not found",
// arriving after, is stale and refuses nothing.
func TestAVoidingLookupThatAnswersAfterAResendChangesNothing(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	s.CreateCalls = 2
	late := t0.Add(budget)
	s.GiveUpCreate()
	if shipping.Next(s.State(), late.Add(time.Hour)) != shipping.Lookup {
		t.Fatal("the voiding does not look the key up")
	}
	want(t, "resend while the lookup is in flight", s.OnCreate(create("c2"), late, budget))
	want(t, "the lookup's late not-found", s.NotFoundForCancel())
	if s.Status != shipping.StatusPending || s.Create.Answer != nil {
		t.Fatalf("a stale not-found settled the resent create: %+v", s)
	}
	want(t, "created", s.Created("shp_1", "TRK_1"), cr, ok, "")
}

func TestGivenUpCreateWhoseShipmentWasVoidedRefusesAResend(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	s.CreateCalls = 1
	s.GiveUpCreate()
	want(t, "found by the voiding", s.Created("shp_1", "TRK_1")) // answered already
	if shipping.Next(s.State(), t0.Add(time.Hour)) != shipping.Cancel {
		t.Fatal("the found shipment is not voided")
	}
	want(t, "voided", s.Voided())
	want(t, "resend", s.OnCreate(create("c2"), t0, budget), cr, no, shipping.ReasonVoided)
	// The orchestrator's own compensation finds nothing live.
	want(t, "compensation", s.OnCancel(cancel("x1"), t0, budget), cn, ok, "")
}

func TestGivenUpCancelIsRetryableAndAResendTriesAgain(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	s.Created("shp_1", "TRK_1")
	s.OnCancel(cancel("x1"), t0, budget)
	late := t0.Add(budget)
	if shipping.Next(s.State(), late) != shipping.GiveUpCancel {
		t.Fatal("no cancel give-up at the deadline")
	}
	r := s.GiveUpCancel()
	want(t, "give up", r, cn, no, shipping.ReasonCarrierUnavailable)
	if !r[0].Retryable {
		t.Fatal("cancel give-up is not retryable")
	}
	want(t, "resend", s.OnCancel(cancel("x2"), late, budget))
	if shipping.Next(s.State(), late) != shipping.Cancel {
		t.Fatal("resent cancel does not call the carrier")
	}
	r = s.Voided()
	want(t, "voided", r, cn, ok, "")
	if r[0].CommandID != "x2" {
		t.Fatalf("the reply names %s, not the resend it answers", r[0].CommandID)
	}
}

func TestAnOrchestratorCancelTakesOverOurVoiding(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	s.CreateCalls = 1
	s.GiveUpCreate()
	want(t, "compensation", s.OnCancel(cancel("x1"), t0, budget))
	if s.InternalCancel || shipping.Next(s.State(), t0) != shipping.Lookup {
		t.Fatalf("compensation did not take over: %+v", s)
	}
	want(t, "not found", s.NeverCreated(), cn, ok, "")
}

func TestCommandsThatContradictTheKeysShipmentAreRefused(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	if err := s.CheckCreate(create("c2")); err != nil {
		t.Fatalf("a repeat was refused: %v", err)
	}
	other := create("c3")
	other.SagaID = "s2"
	otherParcel := create("c4")
	otherParcel.Parcel.Items = []shipping.Item{{SKU: "X", Quantity: 1}}
	otherStep := create("c5")
	otherStep.Step = "ship_again"
	for _, c := range []shipping.CreateCommand{other, otherParcel, otherStep} {
		if err := s.CheckCreate(c); !errors.Is(err, shipping.ErrContradiction) {
			t.Errorf("create %+v: %v", c, err)
		}
	}
	if err := s.CheckCancel(cancel("x1")); err != nil {
		t.Fatalf("the compensation was refused: %v", err)
	}
	wrongOrder := cancel("x2")
	wrongOrder.OrderID = "o2"
	if err := s.CheckCancel(wrongOrder); !errors.Is(err, shipping.ErrContradiction) {
		t.Errorf("cancel for another order: %v", err)
	}
	s.OnCancel(cancel("x1"), t0, budget)
	otherKey := cancel("x3")
	otherKey.Key = "s1:something_else"
	if err := s.CheckCancel(otherKey); !errors.Is(err, shipping.ErrContradiction) {
		t.Errorf("cancel under another key: %v", err)
	}
	// A cancellation that came first knows no parcel yet: any parcel of
	// the same saga and order is its create.
	first, _ := shipping.NewCancelledFirst(cancel("x1"))
	if err := first.CheckCreate(create("c1")); err != nil {
		t.Errorf("the create of a cancelled-first shipment was refused: %v", err)
	}
}

func TestADeclineAnswersACancellationThatArrivedDuringTheCall(t *testing.T) {
	s := shipping.NewShipment(create("c1"), t0, budget)
	s.CreateCalls = 1
	want(t, "cancel during the call", s.OnCancel(cancel("x1"), t0, budget))
	want(t, "declined", s.Declined("undeliverable_address"), cr, no, "undeliverable_address", cn, ok, "")
	if s.CancelStatus != shipping.CancelDone || shipping.Next(s.State(), t0) != shipping.Wait {
		t.Fatalf("after the decline: %+v", s)
	}
}
