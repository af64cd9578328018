package paymentapi_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/concordhq/concord/infra/testkit"
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

// A delivery about an authorization hold, without trace context (as
// Stripe's come), is applied under a span of the trace the hold's
// authorize command was received in: the hold's row keeps the command's
// traceparent.
func TestHoldWebhookAppliesInTheTraceOfTheHoldsAuthorizeCommand(t *testing.T) {
	spans := testkit.Spans()
	const command = "00-5af92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b8-01"
	r := newRig(t)
	key, res := r.newHoldTraced(t, 1500, command)
	if h := holdOf(t, r, key); h.Traceparent != command {
		t.Fatalf("hold %s stored traceparent %q; want its authorize command's %q", key, h.Traceparent, command)
	}
	body := r.sentFor(t, "payment_intent.amount_capturable_updated", res.ProviderID)
	if got := r.deliver(t, body); got != "applied" {
		t.Fatalf("amount_capturable_updated: %s; want applied", got)
	}
	id := eventID(t, body)
	var apply []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Name == "apply payment_intent.amount_capturable_updated" && testkit.SpanAttr(s, "concord.provider_event_id") == id {
			apply = append(apply, s)
		}
	}
	if len(apply) != 1 {
		t.Fatalf("%d apply spans for event %s; want 1", len(apply), id)
	}
	s := apply[0]
	if got, parent := s.SpanContext.TraceID().String(), s.Parent.SpanID().String(); got != "5af92f3577b34da6a3ce929d0e0e4736" || parent != "00f067aa0ba902b8" {
		t.Errorf("apply span in trace %s under span %s; want the command's trace 5af92f3577b34da6a3ce929d0e0e4736 under its span 00f067aa0ba902b8", got, parent)
	}
	if got := testkit.SpanAttr(s, "concord.hold_key"); got != key {
		t.Errorf("apply span's concord.hold_key %q; want %q", got, key)
	}
}
