package inventory

import "testing"

func TestCheck(t *testing.T) {
	held := Known{Reserved: true, Status: StatusHeld}
	committed := Known{Reserved: true, Status: StatusCommitted}
	confirmed := Known{Reserved: true, Status: StatusCommitted, Confirmed: true}
	orchestrated := Known{Reserved: true, Status: StatusHeld, Orchestrated: true}
	cases := []struct {
		name   string
		k      Known
		e      Event
		reason string
	}{
		{"commit of an unknown order", Known{}, PaymentProcessed, ReasonUnknownOrder},
		{"payment failure of an unknown order", Known{}, PaymentFailed, ReasonUnknownOrder},
		{"cancellation of an unknown order", Known{}, OrderCancelled, ReasonUnknownOrder},
		{"confirmation of an unknown order", Known{}, OrderConfirmed, ReasonUnknownOrder},

		{"commit of a held reservation", held, PaymentProcessed, ""},
		{"payment failure of a held reservation", held, PaymentFailed, ""},
		{"cancellation of a held reservation", held, OrderCancelled, ""},
		{"confirmation of a held reservation (payment.processed not seen yet)", held, OrderConfirmed, ""},

		{"confirmation of a committed reservation", committed, OrderConfirmed, ""},
		{"cancellation of a committed, unconfirmed order (timed out, then paid)", committed, OrderCancelled, ""},
		{"a repeated commit", committed, PaymentProcessed, ""},
		{"payment failure after the payment succeeded", committed, PaymentFailed, ReasonPaymentSucceeded},

		{"cancellation of a confirmed order", confirmed, OrderCancelled, ReasonOrderConfirmed},
		{"payment failure of a confirmed order", confirmed, PaymentFailed, ReasonOrderConfirmed},
		{"payment failure of a confirmed order still held", Known{Reserved: true, Status: StatusHeld, Confirmed: true}, PaymentFailed, ReasonOrderConfirmed},
		{"a repeated confirmation", confirmed, OrderConfirmed, ""},
		{"a late commit of a confirmed order", confirmed, PaymentProcessed, ""},

		{"cancellation of a rejected reservation (out of stock)", Known{Reserved: true, Status: StatusRejected}, OrderCancelled, ""},
		{"cancellation of a released reservation", Known{Reserved: true, Status: StatusReleased}, OrderCancelled, ""},
		{"late payment of a released reservation", Known{Reserved: true, Status: StatusReleased}, PaymentProcessed, ""},

		{"choreographed cancellation of an orchestrated order", orchestrated, OrderCancelled, ReasonOrchestratedOrder},
		{"choreographed commit of an orchestrated order", orchestrated, PaymentProcessed, ReasonOrchestratedOrder},
		{"choreographed confirmation of an orchestrated order", orchestrated, OrderConfirmed, ReasonOrchestratedOrder},
	}
	for _, c := range cases {
		reason, bad := Check(c.k, c.e)
		if reason != c.reason || bad != (c.reason != "") {
			t.Errorf("%s: Check(%+v, %s) = %q, %v; want %q", c.name, c.k, c.e, reason, bad, c.reason)
		}
	}
}
