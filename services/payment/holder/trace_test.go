package holder_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/providersim"
)

// The holder's attempt at a command continues the trace the command was
// received in: its provider call and its reply are in that trace.
func TestAHoldCommandsProviderCallAndReplyAreInItsTrace(t *testing.T) {
	r := newRig(t, providersim.Config{}, 0)
	want := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35}
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: want, SpanID: trace.SpanID{0x01}, TraceFlags: trace.FlagsSampled}))
	auth := authorize(sagaID(t), 1500, providersim.PaymentMethodVisa)
	r.sendIn(ctx, auth)
	r.reply(auth.IdempotencyKey)
	if got := r.gw.trace("authorize", auth.IdempotencyKey); got != want {
		t.Errorf("authorize called in trace %s; want the command's %s", got, want)
	}
	var headers map[string]string
	if err := r.pool.QueryRow(context.Background(), `select headers from outbox where event_type = 'saga.step_replied'`).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	if got := outbox.SpanContext(headers).TraceID(); got != want {
		t.Errorf("reply carries traceparent %q; want one of the command's trace %s", headers[schemas.HeaderTraceparent], want)
	}
}
