package repair_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
	"github.com/concordhq/concord/services/reconciler/repair"
)

type provider map[string]string

func (p provider) Get(_ context.Context, id string) (reconciler.External, error) {
	s, ok := p[id]
	if !ok {
		return reconciler.External{}, reconciler.ErrProviderNotFound
	}
	return reconciler.External{ProviderID: id, Status: s}, nil
}

// drift sets up one pending payment the provider reports as external,
// runs a scan, and returns the payment id and the repair command it emitted,
// decoded as the idempotent runner would hand it over.
func drift(t *testing.T, external string) (*pgxpool.Pool, int64, idempotent.Event) {
	t.Helper()
	return driftTraced(t, external, "")
}

// driftTraced is drift of a payment created in the trace traceparent; the
// command's Headers are its outbox row's.
func driftTraced(t *testing.T, external, traceparent string) (*pgxpool.Pool, int64, idempotent.Event) {
	t.Helper()
	ctx := context.Background()
	pool := testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate, reconcilerstore.Migrate)
	var id int64
	if err := pool.QueryRow(ctx, `insert into payments (order_id, idempotency_key, provider_payment_id, amount, currency,
			status, created_at, updated_at, traceparent)
		values (gen_random_uuid()::text, 'k', 'pi_drift', 2500, 'EUR', 'pending', now() - interval '1 hour', now() - interval '1 hour',
			nullif($1, ''))
		returning id`, traceparent).Scan(&id); err != nil {
		t.Fatal(err)
	}
	s, err := reconciler.NewScanner(reconciler.ScannerConfig{Store: reconcilerstore.New(pool), Provider: provider{"pi_drift": external}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.RunBatch(ctx)
	if err != nil || rep.CommandsEmitted != 1 {
		t.Fatalf("scan: %v, %d commands", err, rep.CommandsEmitted)
	}
	var payload []byte
	var topic string
	var headers map[string]string
	if err := pool.QueryRow(ctx, `select payload::text, topic, headers from outbox where event_type like 'payment.apply_%'`).Scan(&payload, &topic, &headers); err != nil {
		t.Fatal(err)
	}
	if topic != repair.Topic {
		t.Fatalf("command on topic %q, want %q", topic, repair.Topic)
	}
	if err := schemas.MustDefault().Validate(payload); err != nil {
		t.Fatalf("command does not validate against its schema: %v", err)
	}
	env, err := schemas.DecodeEnvelope(payload)
	if err != nil {
		t.Fatal(err)
	}
	return pool, id, idempotent.Event{Envelope: env, Topic: topic, Headers: headers}
}

func handle(t *testing.T, pool *pgxpool.Pool, ev idempotent.Event) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		var mux idempotent.Mux
		repair.Register(&mux, outbox.Writer{})
		return mux.Handle(context.Background(), tx, ev, nil)
	})
}

type outcome struct {
	status     string
	version    int64
	events     int
	resolution string
}

func state(t *testing.T, pool *pgxpool.Pool, id int64, eventType string) outcome {
	t.Helper()
	var o outcome
	err := pool.QueryRow(context.Background(), `select p.status, p.version,
			(select count(*) from outbox where event_type = $2),
			coalesce((select resolution from reconciliation_findings where payment_id = p.id), '')
		from payments p where p.id = $1`, id, eventType).Scan(&o.status, &o.version, &o.events, &o.resolution)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestRepairCommandReplayedTwiceHasOneEffect: the same command handled
// twice (a redelivery the dedupe did not catch, a reprocess) moves the
// payment once, emits payment.processed once, and resolves the finding.
func TestRepairCommandReplayedTwiceHasOneEffect(t *testing.T) {
	pool, id, ev := drift(t, reconciler.ExtSucceeded)
	for range 2 {
		if err := handle(t, pool, ev); err != nil {
			t.Fatal(err)
		}
	}
	want := outcome{status: "paid", version: 1, events: 1, resolution: string(reconciler.ResolutionRepaired)}
	if got := state(t, pool, id, "payment.processed"); got != want {
		t.Fatalf("after two deliveries: %+v, want %+v", got, want)
	}
}

// TestRepairAfterTheWebhookWonResolvesTheFindingWithoutASecondEffect: the
// late webhook applied the transition before the command arrived.
func TestRepairAfterTheWebhookWonResolvesTheFindingWithoutASecondEffect(t *testing.T) {
	pool, id, ev := drift(t, reconciler.ExtSucceeded)
	if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := paymentstore.MarkPaid(context.Background(), tx, outbox.Writer{}, id, "succeeded", "webhook:evt_late")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := handle(t, pool, ev); err != nil {
		t.Fatal(err)
	}
	want := outcome{status: "paid", version: 1, events: 1, resolution: string(reconciler.ResolutionAlreadyApplied)}
	if got := state(t, pool, id, "payment.processed"); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// TestRepairOfAPaymentThatMovedElsewhereIsSuperseded: the payment failed
// meanwhile; the command expected pending, so it does not apply.
func TestRepairOfAPaymentThatMovedElsewhereIsSuperseded(t *testing.T) {
	pool, id, ev := drift(t, reconciler.ExtSucceeded)
	if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		_, err := paymentstore.MarkFailed(context.Background(), tx, outbox.Writer{}, id, "canceled", "test", "canceled")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := handle(t, pool, ev); err != nil {
		t.Fatal(err)
	}
	want := outcome{status: "failed", version: 1, events: 0, resolution: string(reconciler.ResolutionSuperseded)}
	if got := state(t, pool, id, "payment.processed"); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// TestApplyCanceledFailsThePendingPayment: a missed cancel becomes
// payment.failed through the writer.
func TestApplyCanceledFailsThePendingPayment(t *testing.T) {
	pool, id, ev := drift(t, reconciler.ExtCanceled)
	if err := handle(t, pool, ev); err != nil {
		t.Fatal(err)
	}
	want := outcome{status: "failed", version: 1, events: 1, resolution: string(reconciler.ResolutionRepaired)}
	if got := state(t, pool, id, "payment.failed"); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}

// TestRepairCommandForAnotherChargeIsDeadLettered: a command naming another
// provider payment than the row holds is a permanent failure.
func TestRepairCommandForAnotherChargeIsDeadLettered(t *testing.T) {
	pool, id, ev := drift(t, reconciler.ExtSucceeded)
	if _, err := pool.Exec(context.Background(), `update payments set provider_payment_id = 'pi_other' where id = $1`, id); err != nil {
		t.Fatal(err)
	}
	err := handle(t, pool, ev)
	if !errors.Is(err, repair.ErrProviderMismatch) || !idempotent.IsPermanent(err) {
		t.Fatalf("err %v, want a permanent ErrProviderMismatch", err)
	}
}
