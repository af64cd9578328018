package payment

import (
	"testing"
	"time"
)

func TestCheckReservation(t *testing.T) {
	order := &KnownOrder{Amount: 1500, Currency: "EUR", CustomerID: "cus_1", PaymentMethod: ""}
	match := ReservationClaim{Amount: 1500, Currency: "EUR", CustomerID: "cus_1", PaymentMethod: "pm_card_visa"}
	with := func(f func(*ReservationClaim)) ReservationClaim { r := match; f(&r); return r }
	const wait = 2 * time.Minute
	cases := []struct {
		name         string
		o            *KnownOrder
		r            ReservationClaim
		waited, wait time.Duration
		verdict      Verdict
		reason       string
	}{
		{"matching reservation is charged", order, match, 0, wait, Charge, ""},
		{"no payment method on both sides is the default", order, with(func(r *ReservationClaim) { r.PaymentMethod = "" }), 0, wait, Charge, ""},
		{"a known order is charged however long the reservation waited", order, match, 3 * wait, wait, Charge, ""},
		{"unknown order just arrived waits", nil, match, 0, wait, Wait, ""},
		{"unknown order waits until just before the wait ends", nil, match, wait - time.Nanosecond, wait, Wait, ""},
		{"unknown order after the wait is refused", nil, match, wait, wait, Refuse, ReasonUnknownOrder},
		{"no wait refuses an unknown order at once", nil, match, 0, 0, Refuse, ReasonUnknownOrder},
		{"another amount", order, with(func(r *ReservationClaim) { r.Amount = 1 }), 0, wait, Refuse, ReasonAmountMismatch},
		{"one cent more", order, with(func(r *ReservationClaim) { r.Amount = 1501 }), 0, wait, Refuse, ReasonAmountMismatch},
		{"another currency", order, with(func(r *ReservationClaim) { r.Currency = "USD" }), 0, wait, Refuse, ReasonAmountMismatch},
		{"another customer", order, with(func(r *ReservationClaim) { r.CustomerID = "cus_2" }), 0, wait, Refuse, ReasonPayerMismatch},
		{"another payment method", order, with(func(r *ReservationClaim) { r.PaymentMethod = "pm_card_mastercard" }), 0, wait, Refuse, ReasonPayerMismatch},
		{"amount is named before payer", order, ReservationClaim{Amount: 9, Currency: "EUR", CustomerID: "cus_9"}, 0, wait, Refuse, ReasonAmountMismatch},
		{"a confirmed order's matching reservation is charged (a redelivery finds its intent)", &KnownOrder{Amount: 1500, Currency: "EUR",
			CustomerID: "cus_1", Confirmed: true}, match, 0, wait, Charge, ""},
	}
	for _, c := range cases {
		v, reason := CheckReservation(c.o, c.r, c.waited, c.wait)
		if v != c.verdict || reason != c.reason {
			t.Errorf("%s: CheckReservation = %v, %q; want %v, %q", c.name, v, reason, c.verdict, c.reason)
		}
	}
}

func TestCheckCancellation(t *testing.T) {
	cases := []struct {
		name   string
		o      *KnownOrder
		refund bool
		reason string
	}{
		{"unknown order: recorded, nothing to refund yet", nil, true, ""},
		{"known, not confirmed", &KnownOrder{Amount: 1}, true, ""},
		{"confirmed", &KnownOrder{Amount: 1, Confirmed: true}, false, ReasonOrderConfirmed},
	}
	for _, c := range cases {
		if refund, reason := CheckCancellation(c.o); refund != c.refund || reason != c.reason {
			t.Errorf("%s: CheckCancellation = %v, %q; want %v, %q", c.name, refund, reason, c.refund, c.reason)
		}
	}
}

func TestCheckConfirmation(t *testing.T) {
	if ok, reason := CheckConfirmation(nil); ok || reason != ReasonUnknownOrder {
		t.Errorf("CheckConfirmation(unknown) = %v, %q; want false, %q", ok, reason, ReasonUnknownOrder)
	}
	if ok, reason := CheckConfirmation(&KnownOrder{}); !ok || reason != "" {
		t.Errorf("CheckConfirmation(known) = %v, %q; want true, \"\"", ok, reason)
	}
}

func TestVerdictString(t *testing.T) {
	for v, want := range map[Verdict]string{Charge: "charge", Wait: "wait", Refuse: "refuse", 0: "Verdict(0)"} {
		if got := v.String(); got != want {
			t.Errorf("Verdict(%d).String() = %q; want %q", int(v), got, want)
		}
	}
}
