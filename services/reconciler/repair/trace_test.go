package repair_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/reconciler/repair"
)

// A repair continues the payment's trace: the command the reconciler
// appends carries it, and so does the event payment-svc's apply appends
// when it handles the command in the command's trace (as the consumer
// runner does).
func TestARepairIsInThePaymentsTrace(t *testing.T) {
	const created = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	want, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	pool, _, ev := driftTraced(t, "succeeded", created)
	cmd := outbox.SpanContext(ev.Headers)
	if cmd.TraceID() != want {
		t.Fatalf("repair command carries traceparent %q; want one of the payment's trace %s", ev.Headers[schemas.HeaderTraceparent], want)
	}
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), cmd)
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var mux idempotent.Mux
		repair.Register(&mux, outbox.Writer{})
		return outbox.Writer{}.Emitting(ctx, tx, func(out outbox.Emitter) error { return mux.Handle(ctx, tx, ev, out) })
	}); err != nil {
		t.Fatal(err)
	}
	var headers map[string]string
	if err := pool.QueryRow(context.Background(), `select headers from outbox where event_type = 'payment.processed'`).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	if got := outbox.SpanContext(headers).TraceID(); got != want {
		t.Errorf("the repair's payment.processed carries traceparent %q; want one of the payment's trace %s", headers[schemas.HeaderTraceparent], want)
	}
}
