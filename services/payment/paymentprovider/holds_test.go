package paymentprovider_test

import (
	"errors"
	"testing"
	"time"

	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/providersim"
)

func TestAuthorizeThenCaptureInFullAndInPart(t *testing.T) {
	r := newRig(t, providersim.Config{}, paymentprovider.Config{})
	for _, tc := range []struct {
		name            string
		capture, wantRx int64
		wantReleased    int64
	}{
		{"full", 0, 1200, 0},
		{"partial", 700, 700, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := r.gw.Authorize(t.Context(), intent("hold-"+tc.name, 1200, providersim.PaymentMethodVisa))
			if err != nil {
				t.Fatal(err)
			}
			if h.Status != paymentprovider.StatusAuthorized || h.AmountCapturable != 1200 || !h.ManualCapture || h.AmountReceived != 0 {
				t.Fatalf("authorized: %+v", h)
			}
			again, err := r.gw.Authorize(t.Context(), intent("hold-"+tc.name, 1200, providersim.PaymentMethodVisa))
			if err != nil || again.ProviderID != h.ProviderID {
				t.Fatalf("authorize again with the key: %v %s, want %s", err, again.ProviderID, h.ProviderID)
			}
			p, err := r.gw.Capture(t.Context(), h.ProviderID, tc.capture, "cap-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if p.Status != paymentprovider.StatusSucceeded || p.AmountReceived != tc.wantRx || p.AmountRefunded != tc.wantReleased {
				t.Fatalf("captured: %+v, want succeeded, received %d, released %d", p, tc.wantRx, tc.wantReleased)
			}
			replay, err := r.gw.Capture(t.Context(), h.ProviderID, tc.capture, "cap-"+tc.name)
			if err != nil || replay.AmountReceived != tc.wantRx {
				t.Fatalf("capture retried with its key: %v %+v", err, replay)
			}
			if _, err := r.gw.Capture(t.Context(), h.ProviderID, 0, "cap-other-"+tc.name); !errors.Is(err, paymentprovider.ErrInvalidRequest) {
				t.Fatalf("capture of a spent hold with another key: %v, want ErrInvalidRequest", err)
			}
		})
	}
}

func TestAuthorizeDeclineIsNotAnError(t *testing.T) {
	r := newRig(t, providersim.Config{}, paymentprovider.Config{})
	p, err := r.gw.Authorize(t.Context(), intent("hold-declined", 500, providersim.PaymentMethodInsufficientFunds))
	if err != nil || p.Status != paymentprovider.StatusDeclined || p.DeclineCode != "insufficient_funds" {
		t.Fatalf("got %v %+v, want StatusDeclined insufficient_funds", err, p)
	}
}

func TestCancelHoldReleasesIt(t *testing.T) {
	r := newRig(t, providersim.Config{}, paymentprovider.Config{})
	h, err := r.gw.Authorize(t.Context(), intent("hold-c", 900, providersim.PaymentMethodVisa))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.gw.CancelHold(t.Context(), h.ProviderID, "hold-c_compensate")
	if err != nil || p.Status != paymentprovider.StatusCanceled || p.AmountCapturable != 0 {
		t.Fatalf("cancel: %v %+v", err, p)
	}
	if again, err := r.gw.CancelHold(t.Context(), h.ProviderID, "hold-c_compensate"); err != nil || again.Status != paymentprovider.StatusCanceled {
		t.Fatalf("cancel retried with its key: %v %+v", err, again)
	}
	if _, err := r.gw.Capture(t.Context(), h.ProviderID, 0, "cap-c"); !errors.Is(err, paymentprovider.ErrInvalidRequest) || errors.Is(err, paymentprovider.ErrHoldExpired) {
		t.Fatalf("capture of a released hold: %v, want ErrInvalidRequest (not expired)", err)
	}
}

func TestCaptureAfterExpiryIsErrHoldExpired(t *testing.T) {
	r := newRig(t, providersim.Config{HoldExpiry: time.Minute}, paymentprovider.Config{})
	h, err := r.gw.Authorize(t.Context(), intent("hold-x", 400, providersim.PaymentMethodVisa))
	if err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := r.gw.Get(t.Context(), h.ProviderID)
		if err == nil && p.Status == paymentprovider.StatusCanceled {
			if p.CancellationReason != "automatic" {
				t.Fatalf("expired hold: %+v, want cancellation_reason automatic", p)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hold did not expire: %v %+v", err, p)
		}
		time.Sleep(2 * time.Millisecond)
	}
	_, err = r.gw.Capture(t.Context(), h.ProviderID, 0, "cap-x")
	if !errors.Is(err, paymentprovider.ErrHoldExpired) {
		t.Fatalf("capture after expiry: %v, want ErrHoldExpired", err)
	}
}

func TestHoldCallsClassifyFaultsAsTheChargeDoes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults func(*providersim.Faults)
		gw     paymentprovider.Config
	}{
		{"429", func(f *providersim.Faults) { f.RateLimitRate = 1 }, paymentprovider.Config{}},
		{"5xx", func(f *providersim.Faults) { f.ServerErrorRate = 1 }, paymentprovider.Config{}},
		{"timeout", func(f *providersim.Faults) { f.HangRate = 1 }, paymentprovider.Config{Timeout: 100 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, providersim.Config{}, tc.gw)
			h, err := r.gw.Authorize(t.Context(), intent("hold-f", 600, providersim.PaymentMethodVisa))
			if err != nil {
				t.Fatal(err)
			}
			f := providersim.DefaultFaults()
			tc.faults(&f)
			if err := r.sim.SetFaults(f); err != nil {
				t.Fatal(err)
			}
			if _, err := r.gw.Authorize(t.Context(), intent("hold-g", 600, providersim.PaymentMethodVisa)); !errors.Is(err, paymentprovider.ErrUnavailable) {
				t.Fatalf("authorize: %v, want ErrUnavailable", err)
			}
			if _, err := r.gw.Capture(t.Context(), h.ProviderID, 0, "cap-f"); !errors.Is(err, paymentprovider.ErrUnavailable) {
				t.Fatalf("capture: %v, want ErrUnavailable", err)
			}
			if _, err := r.gw.CancelHold(t.Context(), h.ProviderID, "cancel-f"); !errors.Is(err, paymentprovider.ErrUnavailable) {
				t.Fatalf("cancel: %v, want ErrUnavailable", err)
			}
			if err := r.sim.SetFaults(providersim.DefaultFaults()); err != nil {
				t.Fatal(err)
			}
			// Retried with the same key, the capture that may have happened
			// is returned, never a second one or a refusal.
			p, err := r.gw.Capture(t.Context(), h.ProviderID, 0, "cap-f")
			if err != nil || p.Status != paymentprovider.StatusSucceeded || p.AmountReceived != 600 {
				t.Fatalf("capture retried: %v %+v", err, p)
			}
		})
	}
}

func TestHoldCallsNeedAKey(t *testing.T) {
	r := newRig(t, providersim.Config{}, paymentprovider.Config{})
	before := r.sim.Stats().Requests
	if _, err := r.gw.Authorize(t.Context(), intent("", 100, providersim.PaymentMethodVisa)); !errors.Is(err, paymentprovider.ErrInvalidRequest) {
		t.Fatalf("authorize without key: %v", err)
	}
	if _, err := r.gw.Capture(t.Context(), "pi_1", 0, ""); !errors.Is(err, paymentprovider.ErrInvalidRequest) {
		t.Fatalf("capture without key: %v", err)
	}
	if _, err := r.gw.CancelHold(t.Context(), "pi_1", ""); !errors.Is(err, paymentprovider.ErrInvalidRequest) {
		t.Fatalf("cancel without key: %v", err)
	}
	if r.sim.Stats().Requests != before {
		t.Fatal("a call without a key reached the provider")
	}
}
