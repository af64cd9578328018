package holder_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment/holder"
	"github.com/concordhq/concord/services/payment/paymentconsumer"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/providersim"
)

// rig is payment-svc's hold path on a fresh database: the consumer's
// handlers (applied as the runner applies them, in a transaction with their
// emitted events) and a running holder, against an in-process provider-sim
// on a manual clock.
type rig struct {
	t     *testing.T
	pool  *pgxpool.Pool
	sim   *providersim.Server
	clock *providersim.ManualClock
	mux   idempotent.Mux
	url   string
	gw    *countingGateway
	h     *holder.Holder
}

// countingGateway counts the holder's provider calls by kind and key.
type countingGateway struct {
	holder.Gateway
	mu     sync.Mutex
	calls  map[string]int           // "kind key" → calls
	traces map[string]trace.TraceID // "kind key" → the trace of the last call
	// captureDown makes captures go unanswered while the provider answers
	// everything else, as a capture lost on its way does.
	captureDown atomic.Bool
}

func (g *countingGateway) count(ctx context.Context, kind, key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls[kind+" "+key]++
	g.traces[kind+" "+key] = trace.SpanContextFromContext(ctx).TraceID()
}

func (g *countingGateway) trace(kind, key string) trace.TraceID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.traces[kind+" "+key]
}

func (g *countingGateway) n(kind, key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[kind+" "+key]
}

func (g *countingGateway) Authorize(ctx context.Context, in paymentprovider.Intent) (paymentprovider.Payment, error) {
	g.count(ctx, "authorize", in.IdempotencyKey)
	return g.Gateway.Authorize(ctx, in)
}

func (g *countingGateway) Capture(ctx context.Context, id string, amount int64, key string) (paymentprovider.Payment, error) {
	g.count(ctx, "capture", key)
	if g.captureDown.Load() {
		return paymentprovider.Payment{}, paymentprovider.ErrUnavailable
	}
	return g.Gateway.Capture(ctx, id, amount, key)
}

func (g *countingGateway) CancelHold(ctx context.Context, id, key string) (paymentprovider.Payment, error) {
	g.count(ctx, "cancel", key)
	return g.Gateway.CancelHold(ctx, id, key)
}

func (g *countingGateway) Refund(ctx context.Context, id, key string) (paymentprovider.Refund, error) {
	g.count(ctx, "refund", key)
	return g.Gateway.Refund(ctx, id, key)
}

func newRig(t *testing.T, cfg providersim.Config, gwTimeout time.Duration) *rig {
	t.Helper()
	r := &rig{t: t, pool: testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate)}
	r.clock = providersim.NewManualClock(time.Now().Truncate(time.Second))
	cfg.Clock, cfg.TickInterval, cfg.Faults = r.clock, 2*time.Millisecond, providersim.DefaultFaults()
	sim, err := providersim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.sim = sim
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = sim.Close() })
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_holds", BaseURL: ts.URL, Timeout: gwTimeout})
	if err != nil {
		t.Fatal(err)
	}
	r.url, r.gw = ts.URL, &countingGateway{Gateway: gw, calls: map[string]int{}, traces: map[string]trace.TraceID{}}
	// The poll is an hour away: commands are taken because send nudges
	// the holder, as the service does after its consumer commits, and
	// retries because the holder wakes itself when they are due.
	h, err := holder.New(holder.Config{Pool: r.pool, Gateway: r.gw, PollInterval: time.Hour,
		FirstRetry: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Lease: 5 * time.Second,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	r.h = h
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	paymentconsumer.RegisterHolds(&r.mux)
	return r
}

// send applies a command as the consumer would, with a fresh event id.
func (r *rig) send(p contract.Payload) {
	r.t.Helper()
	r.sendIn(context.Background(), p)
}

// sendIn is send with ctx as the consumer span's context.
func (r *rig) sendIn(ctx context.Context, p contract.Payload) {
	r.t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		r.t.Fatal(err)
	}
	ev := idempotent.Event{Envelope: schemas.Envelope{EventID: schemas.NewEventID(), EventType: string(p.EventType()),
		EventVersion: p.EventVersion(), Data: data, CorrelationID: "corr-" + p.PartitionKey()}}
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		return outbox.Writer{}.Emitting(ctx, tx, func(out outbox.Emitter) error { return r.mux.Handle(ctx, tx, ev, out) })
	})
	if err != nil {
		r.t.Fatalf("applying %s: %v", p.EventType(), err)
	}
	r.h.Nudge()
}

// replies are the saga.step_replied events in the outbox for key, oldest first.
func (r *rig) replies(key string) []contract.SagaStepRepliedV1 {
	r.t.Helper()
	rows, err := r.pool.Query(context.Background(), `select payload from outbox where event_type = 'saga.step_replied' order by id`)
	if err != nil {
		r.t.Fatal(err)
	}
	payloads, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		r.t.Fatal(err)
	}
	var out []contract.SagaStepRepliedV1
	for _, b := range payloads {
		var env schemas.Envelope
		var d contract.SagaStepRepliedV1
		if err := json.Unmarshal(b, &env); err != nil {
			r.t.Fatal(err)
		}
		if err := json.Unmarshal(env.Data, &d); err != nil {
			r.t.Fatal(err)
		}
		if d.IdempotencyKey == key {
			out = append(out, d)
		}
	}
	return out
}

// reply waits for the first reply to key.
func (r *rig) reply(key string) contract.SagaStepRepliedV1 {
	r.t.Helper()
	var got []contract.SagaStepRepliedV1
	eventually(r.t, "a reply to "+key, func() bool { got = r.replies(key); return len(got) > 0 })
	return got[0]
}

func (r *rig) hold(key string) paymentstore.Hold {
	r.t.Helper()
	h, found, err := paymentstore.HoldByKey(context.Background(), r.pool, key)
	if err != nil || !found {
		r.t.Fatalf("hold %s: found %v, %v", key, found, err)
	}
	return h
}

// attempts is how often the holder took up the command with key.
func (r *rig) attempts(key string) int {
	r.t.Helper()
	c, err := paymentstore.HoldCommandByKey(context.Background(), r.pool, key)
	if err != nil {
		r.t.Fatal(err)
	}
	return c.Attempts
}

// intentsWithKey counts the provider's PaymentIntents for a hold key.
func (r *rig) intentsWithKey(t *testing.T, key string) int {
	t.Helper()
	n := 0
	page, err := r.listAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range page {
		if p.Metadata["hold_key"] == key {
			n++
		}
	}
	return n
}

func (r *rig) listAll() ([]paymentprovider.Payment, error) {
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_reader", BaseURL: r.url})
	if err != nil {
		return nil, err
	}
	page, err := gw.ListCreated(context.Background(), r.clock.Now().Add(-time.Hour), r.clock.Now().Add(time.Hour), "", 100)
	return page.Items, err
}

// testWriter sends the holder's warnings to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("not yet")
	})
}

func authorize(saga string, amount int64, pm string) contract.PaymentAuthorizeHoldV1 {
	return contract.PaymentAuthorizeHoldV1{SagaID: saga, Step: "reserve_credit", IdempotencyKey: saga + ":reserve_credit", Attempt: 1,
		OrderID: saga, CustomerID: "c-1", Amount: amount, Currency: "EUR", PaymentMethod: pm}
}

func capture(saga string, amount int64) contract.PaymentCaptureHoldV1 {
	return contract.PaymentCaptureHoldV1{SagaID: saga, Step: "capture_payment", IdempotencyKey: saga + ":capture_payment", Attempt: 1,
		OrderID: saga, HoldKey: saga + ":reserve_credit", Amount: amount, Currency: "EUR"}
}

func cancelHold(saga string, amount int64) contract.PaymentCancelHoldV1 {
	return contract.PaymentCancelHoldV1{SagaID: saga, Step: "reserve_credit", IdempotencyKey: saga + ":reserve_credit_compensate", Attempt: 1,
		OrderID: saga, HoldKey: saga + ":reserve_credit", Amount: amount, Currency: "EUR", Reason: "create_shipment failed"}
}

func sagaID(*testing.T) string { return schemas.NewEventID() }
