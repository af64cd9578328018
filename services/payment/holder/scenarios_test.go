package holder_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/providersim"
)

func TestAuthorizeAndCaptureReplyOnceAndRepeatTheReplyToDuplicates(t *testing.T) {
	r := newRig(t, providersim.Config{}, 0)
	saga := sagaID(t)
	auth := authorize(saga, 1500, providersim.PaymentMethodVisa)
	r.send(auth)
	got := r.reply(auth.IdempotencyKey)
	if got.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || got.ProviderPaymentID == "" || got.Amount == nil || *got.Amount != 1500 ||
		got.CommandType != contract.SagaStepRepliedV1CommandTypePaymentAuthorizeHold || got.Step != "reserve_credit" || got.SagaID != saga {
		t.Fatalf("authorize reply: %+v", got)
	}
	if h := r.hold(auth.IdempotencyKey); h.Status != payment.HoldAuthorized || h.ProviderPaymentID != got.ProviderPaymentID {
		t.Fatalf("hold after authorize: %+v", h)
	}
	// The orchestrator sends the command again (it missed the reply):
	// the same reply comes back, and the provider is not called again.
	r.send(auth)
	eventually(t, "the reply sent again", func() bool { return len(r.replies(auth.IdempotencyKey)) == 2 })
	if again := r.replies(auth.IdempotencyKey)[1]; !reflect.DeepEqual(again, got) {
		t.Fatalf("second reply %+v differs from the first %+v", again, got)
	}
	if n := r.gw.n("authorize", auth.IdempotencyKey); n != 1 {
		t.Fatalf("%d authorize calls for one key, want 1", n)
	}

	capt := capture(saga, 1500)
	r.send(capt)
	c := r.reply(capt.IdempotencyKey)
	if c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || c.Amount == nil || *c.Amount != 1500 || c.ProviderPaymentID != got.ProviderPaymentID {
		t.Fatalf("capture reply: %+v", c)
	}
	r.send(capt)
	eventually(t, "the capture reply sent again", func() bool { return len(r.replies(capt.IdempotencyKey)) == 2 })
	if n := r.gw.n("capture", capt.IdempotencyKey); n != 1 {
		t.Fatalf("%d capture calls for one key, want 1", n)
	}
	if h := r.hold(auth.IdempotencyKey); h.Status != payment.HoldCaptured || h.AmountCaptured != 1500 {
		t.Fatalf("hold after capture: %+v", h)
	}
}

func TestPartialCaptureTakesOnlyTheAmountAsked(t *testing.T) {
	r := newRig(t, providersim.Config{}, 0)
	saga := sagaID(t)
	r.send(authorize(saga, 1000, ""))
	r.reply(saga + ":reserve_credit")
	r.send(capture(saga, 600))
	c := r.reply(saga + ":capture_payment")
	if c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || c.Amount == nil || *c.Amount != 600 {
		t.Fatalf("partial capture reply: %+v", c)
	}
	if h := r.hold(saga + ":reserve_credit"); h.Status != payment.HoldCaptured || h.AmountCaptured != 600 || h.Amount != 1000 {
		t.Fatalf("hold after partial capture: %+v", h)
	}
}

func TestCaptureOfMoreThanTheHoldFailsWithoutAProviderCall(t *testing.T) {
	r := newRig(t, providersim.Config{}, 0)
	saga := sagaID(t)
	r.send(authorize(saga, 1000, ""))
	r.reply(saga + ":reserve_credit")
	r.send(capture(saga, 1001))
	c := r.reply(saga + ":capture_payment")
	if c.Outcome != contract.SagaStepRepliedV1OutcomeFailed || c.Reason != payment.ReasonAmountExceeds {
		t.Fatalf("over-capture reply: %+v", c)
	}
	if n := r.gw.n("capture", saga+":capture_payment"); n != 0 {
		t.Fatalf("%d capture calls, want none", n)
	}
}

func TestDeclinedAuthorizationRepliesFailedWithTheDeclineCode(t *testing.T) {
	r := newRig(t, providersim.Config{}, 0)
	saga := sagaID(t)
	r.send(authorize(saga, 1000, providersim.PaymentMethodInsufficientFunds))
	got := r.reply(saga + ":reserve_credit")
	if got.Outcome != contract.SagaStepRepliedV1OutcomeFailed || got.Reason != "insufficient_funds" || got.Retryable == nil || *got.Retryable {
		t.Fatalf("declined reply: %+v", got)
	}
	if h := r.hold(saga + ":reserve_credit"); h.Status != payment.HoldDeclined {
		t.Fatalf("hold: %+v", h)
	}
	// Compensating a declined hold has nothing to undo.
	r.send(cancelHold(saga, 1000))
	if c := r.reply(saga + ":reserve_credit_compensate"); c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded {
		t.Fatalf("compensation of a declined hold: %+v", c)
	}
}

func TestCompensationReleasesAnAuthorizedHoldAndRefundsACapturedOne(t *testing.T) {
	r := newRig(t, providersim.Config{}, 0)
	held, taken := sagaID(t)+"-held", sagaID(t)+"-taken"
	r.send(authorize(held, 800, ""))
	r.send(authorize(taken, 900, ""))
	r.reply(held + ":reserve_credit")
	r.reply(taken + ":reserve_credit")
	r.send(capture(taken, 900))
	r.reply(taken + ":capture_payment")

	r.send(cancelHold(held, 800))
	r.send(cancelHold(taken, 900))
	for _, tc := range []struct {
		saga string
		want payment.HoldStatus
		call string
	}{{held, payment.HoldReleased, "cancel"}, {taken, payment.HoldRefunded, "refund"}} {
		c := r.reply(tc.saga + ":reserve_credit_compensate")
		if c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || c.CommandType != contract.SagaStepRepliedV1CommandTypePaymentCancelHold {
			t.Fatalf("%s: compensation reply %+v", tc.saga, c)
		}
		if h := r.hold(tc.saga + ":reserve_credit"); h.Status != tc.want {
			t.Fatalf("%s: hold %+v, want %s", tc.saga, h, tc.want)
		}
		if n := r.gw.n(tc.call, tc.saga+":reserve_credit_compensate"); n != 1 {
			t.Fatalf("%s: %d %s calls with the compensation's key, want 1", tc.saga, n, tc.call)
		}
	}
}

func TestCompensationBeforeAnyHoldRefusesALateAuthorize(t *testing.T) {
	r := newRig(t, providersim.Config{}, 0)
	saga := sagaID(t)
	r.send(cancelHold(saga, 500))
	if c := r.reply(saga + ":reserve_credit_compensate"); c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded {
		t.Fatalf("compensation with nothing held: %+v", c)
	}
	r.send(authorize(saga, 500, ""))
	got := r.reply(saga + ":reserve_credit")
	if got.Outcome != contract.SagaStepRepliedV1OutcomeFailed || got.Reason != payment.ReasonHoldCanceled {
		t.Fatalf("authorize after its compensation: %+v", got)
	}
	if n := r.gw.n("authorize", saga+":reserve_credit"); n != 0 {
		t.Fatalf("%d authorize calls after the compensation, want 0", n)
	}
}

func TestProviderOutageThenSuccessHoldsOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults func(*providersim.Faults)
	}{
		{"5xx", func(f *providersim.Faults) { f.ServerErrorRate = 1 }},
		{"timeout", func(f *providersim.Faults) { f.HangRate = 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, providersim.Config{}, 200*time.Millisecond)
			saga := sagaID(t)
			f := providersim.DefaultFaults()
			tc.faults(&f)
			if err := r.sim.SetFaults(f); err != nil {
				t.Fatal(err)
			}
			r.send(authorize(saga, 700, ""))
			key := saga + ":reserve_credit"
			eventually(t, "two failed attempts", func() bool { return r.attempts(key) >= 2 })
			// A repeat while the outcome is unknown is stored nowhere and
			// answered by the one reply to come.
			r.send(authorize(saga, 700, ""))
			if len(r.replies(key)) != 0 {
				t.Fatal("a reply was sent while the provider did not answer")
			}
			if err := r.sim.SetFaults(providersim.DefaultFaults()); err != nil {
				t.Fatal(err)
			}
			got := r.reply(key)
			if got.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded {
				t.Fatalf("reply after the outage: %+v", got)
			}
			if n := len(r.replies(key)); n != 1 {
				t.Fatalf("%d replies to an authorize sent twice before its outcome was known, want 1", n)
			}
			if n := r.intentsWithKey(t, key); n != 1 {
				t.Fatalf("%d PaymentIntents for one hold, want 1", n)
			}
			// The capture meets the same outage and still captures once.
			if err := r.sim.SetFaults(f); err != nil {
				t.Fatal(err)
			}
			r.send(capture(saga, 700))
			eventually(t, "a failed capture attempt", func() bool { return r.attempts(saga+":capture_payment") >= 2 })
			if err := r.sim.SetFaults(providersim.DefaultFaults()); err != nil {
				t.Fatal(err)
			}
			if c := r.reply(saga + ":capture_payment"); c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || *c.Amount != 700 {
				t.Fatalf("capture reply after the outage: %+v", c)
			}
			if len(r.replies(key)) != 1 || len(r.replies(saga+":capture_payment")) != 1 {
				t.Fatal("more than one reply per command")
			}
		})
	}
}

func TestHoldExpiredBeforeCaptureRepliesFailed(t *testing.T) {
	r := newRig(t, providersim.Config{HoldExpiry: time.Minute}, 0)
	saga := sagaID(t)
	r.send(authorize(saga, 1200, ""))
	got := r.reply(saga + ":reserve_credit")
	r.clock.Advance(time.Minute)
	eventually(t, "the provider to expire the hold", func() bool {
		list, err := r.listAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list {
			if p.ProviderID == got.ProviderPaymentID {
				return p.CancellationReason == "automatic"
			}
		}
		return false
	})
	r.send(capture(saga, 1200))
	c := r.reply(saga + ":capture_payment")
	if c.Outcome != contract.SagaStepRepliedV1OutcomeFailed || c.Reason != payment.ReasonHoldExpired || c.Retryable == nil || *c.Retryable {
		t.Fatalf("capture of an expired hold: %+v, want failed hold_expired, not retryable", c)
	}
	if h := r.hold(saga + ":reserve_credit"); h.Status != payment.HoldExpired {
		t.Fatalf("hold: %+v, want expired", h)
	}
	// The orchestrator compensates: nothing is held any more.
	r.send(cancelHold(saga, 1200))
	if c := r.reply(saga + ":reserve_credit_compensate"); c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded {
		t.Fatalf("compensation of an expired hold: %+v", c)
	}
	if n := r.gw.n("cancel", saga+":reserve_credit_compensate"); n != 0 {
		t.Fatalf("%d cancel calls for an expired hold, want 0", n)
	}
}

// The provider can hold a capture this service has not recorded (made
// with the capture's key by a call whose answer never reached us): the
// cancel finds the intent captured and refunds it. The hold must end
// refunded, as the provider has it, and the capture recorded late must not
// move it back.
func TestACompensationThatOvertakesItsCaptureRefundsAndTheHoldEndsRefunded(t *testing.T) {
	r := newRig(t, providersim.Config{}, 0)
	saga := sagaID(t)
	r.send(authorize(saga, 900, ""))
	pi := r.reply(saga + ":reserve_credit").ProviderPaymentID
	// The capture attempt whose answer is still on its way: executed at
	// the provider, not yet recorded here.
	if _, err := r.gw.Gateway.Capture(t.Context(), pi, 900, saga+":capture_payment"); err != nil {
		t.Fatal(err)
	}
	r.send(cancelHold(saga, 900))
	if c := r.reply(saga + ":reserve_credit_compensate"); c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded {
		t.Fatalf("compensation of a hold captured meanwhile: %+v", c)
	}
	if h := r.hold(saga + ":reserve_credit"); h.Status != payment.HoldRefunded {
		t.Fatalf("hold after the compensation refunded its capture: %s, want refunded", h.Status)
	}
	r.send(capture(saga, 900))
	r.reply(saga + ":capture_payment")
	if h := r.hold(saga + ":reserve_credit"); h.Status != payment.HoldRefunded {
		t.Fatalf("hold after the late capture: %s, want refunded", h.Status)
	}
}

// The orchestrator gave up on a capture the provider did not answer and
// compensates while the capture is still pending here. The cancel must
// wait for the capture's outcome, not release the hold under it: the
// capture succeeds, then the cancel refunds it, in the order they were
// sent.
func TestACancelWaitsForThePendingCaptureSentBeforeIt(t *testing.T) {
	r := newRig(t, providersim.Config{}, 0)
	saga := sagaID(t)
	capKey, cancelKey := saga+":capture_payment", saga+":reserve_credit_compensate"
	r.send(authorize(saga, 1000, ""))
	r.reply(saga + ":reserve_credit")
	r.gw.captureDown.Store(true)
	r.send(capture(saga, 600))
	eventually(t, "a capture attempt without an answer", func() bool { return r.attempts(capKey) >= 1 })
	r.send(cancelHold(saga, 1000))
	// The second pass to take up the capture from now began after the
	// cancel was stored and due: it is the pass that would have taken the
	// cancel too, if not earlier.
	seen := r.attempts(capKey)
	eventually(t, "two more capture attempts or a cancel attempt", func() bool {
		return r.attempts(capKey) >= seen+2 || r.attempts(cancelKey) > 0
	})
	if n := r.attempts(cancelKey); n != 0 {
		t.Fatalf("the cancel was attempted %d times while the capture sent before it was pending, want 0", n)
	}
	r.gw.captureDown.Store(false)
	if c := r.reply(capKey); c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || c.Amount == nil || *c.Amount != 600 {
		t.Fatalf("capture reply: %+v, want succeeded 600", c)
	}
	if c := r.reply(cancelKey); c.Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || c.Amount == nil || *c.Amount != 600 {
		t.Fatalf("compensation reply: %+v, want a succeeded refund of 600", c)
	}
	if h := r.hold(saga + ":reserve_credit"); h.Status != payment.HoldRefunded {
		t.Fatalf("hold: %s, want refunded", h.Status)
	}
	if n := r.gw.n("cancel", cancelKey); n != 0 {
		t.Fatalf("%d cancel calls for a captured hold, want none (a refund)", n)
	}
}
