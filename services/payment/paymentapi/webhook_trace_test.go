package paymentapi_test

import (
	"context"
	"testing"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// A delivery that comes without trace context (as Stripe's do) still
// moves the payment in the trace that created it: the event it appends
// carries that trace.
func TestWebhookAppliesInTheTraceThatCreatedThePayment(t *testing.T) {
	const created = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r := newRig(t)
	p, _, body := r.chargeTraced(t, "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e01", created)
	if p.Traceparent != created {
		t.Fatalf("payment stored traceparent %q; want %q", p.Traceparent, created)
	}
	if got := r.deliver(t, body); got != "applied" {
		t.Fatalf("delivery: %s; want applied", got)
	}
	var headers map[string]string
	if err := r.pool.QueryRow(context.Background(), `select headers from outbox where event_type = $1`,
		string(contract.TypePaymentProcessed)).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	if got := outbox.SpanContext(headers).TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("payment.processed carries traceparent %q; want one of the payment's trace 4bf92f3577b34da6a3ce929d0e0e4736", headers[schemas.HeaderTraceparent])
	}
}
