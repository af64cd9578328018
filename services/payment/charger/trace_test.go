package charger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/charger"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

// tracedGateway charges everything and remembers the trace of each call.
type tracedGateway struct {
	mu     sync.Mutex
	traces []trace.TraceID
}

func (g *tracedGateway) CreateAndConfirm(ctx context.Context, in paymentprovider.Intent) (paymentprovider.Payment, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.traces = append(g.traces, trace.SpanContextFromContext(ctx).TraceID())
	return paymentprovider.Payment{ProviderID: "pi_" + in.IdempotencyKey, Status: paymentprovider.StatusSucceeded, ProviderStatus: "succeeded"}, nil
}

func (g *tracedGateway) Get(context.Context, string) (paymentprovider.Payment, error) {
	return paymentprovider.Payment{}, errors.New("not expected")
}

func (g *tracedGateway) Refund(context.Context, string, string) (paymentprovider.Refund, error) {
	return paymentprovider.Refund{}, errors.New("not expected")
}

// A charge attempt continues the trace the payment was created in: the
// provider call and the payment's event are in it.
func TestAChargeAttemptIsInThePaymentsTrace(t *testing.T) {
	const created = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	want, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	pool := testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate)
	if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, _, err := paymentstore.CreateIntent(context.Background(), tx, paymentstore.NewIntent{OrderID: "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e11",
			Amount: 1999, Currency: "EUR", Traceparent: created})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	gw := &tracedGateway{}
	c, err := charger.New(charger.Config{Pool: pool, Outbox: outbox.Writer{}, Gateway: gw, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)
	testkit.Eventually(t, 10*time.Second, "the payment recorded paid", func() error {
		p, err := paymentstore.ByOrder(context.Background(), pool, "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9e11")
		if err != nil || p.Status != payment.StatusPaid {
			return fmt.Errorf("payment %s, %v", p.Status, err)
		}
		return nil
	})
	gw.mu.Lock()
	calls := gw.traces
	gw.mu.Unlock()
	if len(calls) != 1 || calls[0] != want {
		t.Errorf("provider called in traces %v; want once in the payment's %s", calls, want)
	}
	var headers map[string]string
	if err := pool.QueryRow(context.Background(), `select headers from outbox where event_type = 'payment.processed'`).Scan(&headers); err != nil {
		t.Fatal(err)
	}
	if got := outbox.SpanContext(headers).TraceID(); got != want {
		t.Errorf("payment.processed carries traceparent %q; want one of the payment's trace %s", headers[schemas.HeaderTraceparent], want)
	}
}
