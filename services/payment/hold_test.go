package payment_test

import (
	"testing"

	"github.com/concordhq/concord/services/payment"
)

func TestHoldMovesOnlyForward(t *testing.T) {
	allowed := map[[2]payment.HoldStatus]bool{
		{payment.HoldAuthorizing, payment.HoldAuthorized}: true,
		{payment.HoldAuthorizing, payment.HoldDeclined}:   true,
		{payment.HoldAuthorizing, payment.HoldCaptured}:   true,
		{payment.HoldAuthorizing, payment.HoldReleased}:   true,
		{payment.HoldAuthorizing, payment.HoldExpired}:    true,
		{payment.HoldAuthorizing, payment.HoldVoid}:       true,
		{payment.HoldAuthorized, payment.HoldCaptured}:    true,
		{payment.HoldAuthorized, payment.HoldReleased}:    true,
		{payment.HoldAuthorized, payment.HoldExpired}:     true,
		{payment.HoldCaptured, payment.HoldRefunded}:      true,
		// captured by an attempt whose answer is not recorded yet
		{payment.HoldAuthorized, payment.HoldRefunded}: true,
	}
	for _, from := range payment.HoldStatuses {
		for _, to := range payment.HoldStatuses {
			if got, want := payment.HoldMoves(from, to), allowed[[2]payment.HoldStatus{from, to}]; got != want {
				t.Errorf("HoldMoves(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	if payment.HoldMoves("bogus", payment.HoldAuthorized) || payment.HoldMoves(payment.HoldAuthorizing, "bogus") {
		t.Error("an unknown status moved")
	}
}

func TestHoldCommandSteps(t *testing.T) {
	type want struct {
		a      payment.StepAction
		reason string
	}
	for _, tc := range []struct {
		s                                  payment.HoldStatus
		authorize, capture, captureTooMuch want
		cancel                             payment.StepAction
	}{
		{payment.HoldAuthorizing, want{payment.StepCall, ""}, want{payment.StepWait, ""}, want{payment.StepWait, ""}, payment.StepWait},
		{payment.HoldAuthorized, want{payment.StepSucceed, ""}, want{payment.StepCall, ""}, want{payment.StepFail, payment.ReasonAmountExceeds}, payment.StepCall},
		{payment.HoldDeclined, want{payment.StepFail, ""}, want{payment.StepFail, payment.ReasonHoldNotHeld}, want{payment.StepFail, payment.ReasonHoldNotHeld}, payment.StepSucceed},
		{payment.HoldCaptured, want{payment.StepSucceed, ""}, want{payment.StepSucceed, ""}, want{payment.StepSucceed, ""}, payment.StepRefund},
		{payment.HoldReleased, want{payment.StepSucceed, ""}, want{payment.StepFail, payment.ReasonHoldCanceled}, want{payment.StepFail, payment.ReasonHoldCanceled}, payment.StepSucceed},
		{payment.HoldExpired, want{payment.StepSucceed, ""}, want{payment.StepFail, payment.ReasonHoldExpired}, want{payment.StepFail, payment.ReasonHoldExpired}, payment.StepSucceed},
		{payment.HoldRefunded, want{payment.StepSucceed, ""}, want{payment.StepFail, payment.ReasonHoldCanceled}, want{payment.StepFail, payment.ReasonHoldCanceled}, payment.StepSucceed},
		{payment.HoldVoid, want{payment.StepFail, payment.ReasonHoldCanceled}, want{payment.StepFail, payment.ReasonHoldCanceled}, want{payment.StepFail, payment.ReasonHoldCanceled}, payment.StepSucceed},
	} {
		if a, r := payment.AuthorizeStep(tc.s); a != tc.authorize.a || r != tc.authorize.reason {
			t.Errorf("AuthorizeStep(%s) = %v %q, want %v %q", tc.s, a, r, tc.authorize.a, tc.authorize.reason)
		}
		if a, r := payment.CaptureStep(tc.s, true, 100, 100); a != tc.capture.a || r != tc.capture.reason {
			t.Errorf("CaptureStep(%s, 100 of 100) = %v %q, want %v %q", tc.s, a, r, tc.capture.a, tc.capture.reason)
		}
		if a, r := payment.CaptureStep(tc.s, true, 100, 101); a != tc.captureTooMuch.a || r != tc.captureTooMuch.reason {
			t.Errorf("CaptureStep(%s, 101 of 100) = %v %q, want %v %q", tc.s, a, r, tc.captureTooMuch.a, tc.captureTooMuch.reason)
		}
		if a := payment.CancelStep(tc.s, true); a != tc.cancel {
			t.Errorf("CancelStep(%s) = %v, want %v", tc.s, a, tc.cancel)
		}
	}
	if a, r := payment.CaptureStep("", false, 0, 100); a != payment.StepFail || r != payment.ReasonHoldNotFound {
		t.Errorf("capture of a missing hold: %v %q", a, r)
	}
	if a := payment.CancelStep("", false); a != payment.StepSucceed {
		t.Errorf("cancel of a missing hold: %v, want succeed (nothing to undo)", a)
	}
}
