package holder_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment/holder"
	"github.com/concordhq/concord/services/payment/paymentconsumer"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/providersim"
)

// TestHoldCommandsOverKafkaGetOneEffectAndTheirRepliesOnSagaReplies is the
// participant's whole path on the real stack: commands appended to an
// orchestrator's outbox and relayed to payment-commands, payment-svc's
// consumer (the idempotent runner with the service's batch handler)
// storing them, the holder calling provider-sim, and the replies relayed
// from the payment database's outbox to saga-replies. A command sent twice
// holds once and is answered twice with the same reply.
func TestHoldCommandsOverKafkaGetOneEffectAndTheirRepliesOnSagaReplies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kafka := testkit.NewKafka(t)
	adm := kafka.Admin(t)
	prefix := testkit.UniqueName(t, "holds") + "."
	events := outbox.Writer{TopicPrefix: prefix}
	commandsTopic, repliesTopic := prefix+paymentconsumer.HoldTopic, prefix+contract.TypeSagaStepReplied.Topic()
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), commandsTopic, repliesTopic) })
	for _, topic := range []string{commandsTopic, repliesTopic} {
		if _, err := adm.CreateTopic(ctx, 3, -1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Fatalf("create topic %s: %v", topic, err)
		}
	}
	kcfg := kafka.Config()
	orchestrator := testkit.NewPool(t, outbox.Migrate)
	payments := testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate, idempotent.Migrate)

	sim, err := providersim.New(providersim.Config{Faults: providersim.DefaultFaults(), TickInterval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = sim.Close() })
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_e2e_holds", BaseURL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}

	run := func(name string, f func(context.Context) error) {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- f(rctx) }()
		t.Cleanup(func() {
			stop()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	for _, pool := range []*pgxpool.Pool{orchestrator, payments} {
		relay, err := publisher.New(publisher.Config{Pool: pool, Kafka: kcfg, Shards: 2, Workers: 1, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		run("relay", relay.Run)
	}
	var mux idempotent.Mux
	paymentconsumer.Register(&mux, nil)
	paymentconsumer.RegisterHolds(&mux)
	consumer, err := idempotent.NewRunner(idempotent.Config{Group: testkit.UniqueName(t, "payment-svc"), Topics: []string{commandsTopic},
		Pool: payments, Kafka: kcfg, BatchHandler: paymentconsumer.BatchHandler(&mux, nil), Types: mux.Types(), Outbox: events})
	if err != nil {
		t.Fatal(err)
	}
	run("payment commands", consumer.Run)
	h, err := holder.New(holder.Config{Pool: payments, Outbox: events, Gateway: gw, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run("holder", h.Run)

	saga := schemas.NewEventID()
	send := func(p contract.Payload) {
		t.Helper()
		if err := pgx.BeginFunc(ctx, orchestrator, func(tx pgx.Tx) error {
			_, err := events.Append(ctx, tx, outbox.Event{Payload: p, CorrelationID: saga})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	cl := kafka.Client(t, kgo.ConsumeTopics(repliesTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var replies []contract.SagaStepRepliedV1
	await := func(n int) {
		t.Helper()
		for len(replies) < n {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("got %d replies before the deadline, want %d: %+v", len(replies), n, replies)
			}
			fs.EachRecord(func(r *kgo.Record) {
				var env schemas.Envelope
				var d contract.SagaStepRepliedV1
				if err := json.Unmarshal(r.Value, &env); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(env.Data, &d); err != nil {
					t.Fatal(err)
				}
				if string(r.Key) != saga || env.CorrelationID != saga {
					t.Errorf("reply keyed %q, correlation %q; want the saga %s", r.Key, env.CorrelationID, saga)
				}
				replies = append(replies, d)
			})
		}
	}
	auth := authorize(saga, 1000, "")
	send(auth)
	await(1)
	send(auth) // the orchestrator missed the reply and sends the command again
	await(2)
	send(capture(saga, 600))
	send(cancelHold(saga, 1000)) // compensated after the capture: a refund
	await(4)
	byKey := map[string][]contract.SagaStepRepliedV1{}
	for _, r := range replies {
		byKey[r.IdempotencyKey] = append(byKey[r.IdempotencyKey], r)
	}
	a := byKey[auth.IdempotencyKey]
	if len(a) != 2 || a[0].Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || a[0].ProviderPaymentID == "" {
		t.Fatalf("authorize replies: %+v", a)
	}
	if !reflect.DeepEqual(a[1], a[0]) {
		t.Fatalf("the repeated authorize got %+v, the first %+v", a[1], a[0])
	}
	if c := byKey[saga+":capture_payment"]; len(c) != 1 || c[0].Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || *c[0].Amount != 600 {
		t.Fatalf("capture replies: %+v", c)
	}
	if c := byKey[saga+":reserve_credit_compensate"]; len(c) != 1 || c[0].Outcome != contract.SagaStepRepliedV1OutcomeSucceeded || *c[0].Amount != 600 {
		t.Fatalf("compensation replies: %+v, want one succeeded refund of 600", c)
	}
	page, err := gw.ListCreated(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].Status != paymentprovider.StatusRefunded {
		t.Fatalf("provider holds %+v; want one PaymentIntent, refunded", page.Items)
	}
}
