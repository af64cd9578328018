package repair_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/order/orderconsumer"
	"github.com/concordhq/concord/services/order/orderstore"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/providersim"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerprovider"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
	"github.com/concordhq/concord/services/reconciler/repair"
)

// TestDroppedSuccessWebhookIsHealedAndTheOrderConfirms is the whole chain
// on the real stack: the provider charged the order but its success webhook
// never reached payment-svc, so the payment is pending while the provider
// says succeeded. The reconciler records one finding and emits one command;
// the relay publishes it to payment-commands; payment-svc's handler (on the
// idempotent runner) applies it through the canonical writer; the relay
// publishes payment.processed; the order service's handlers confirm the
// order.
func TestDroppedSuccessWebhookIsHealedAndTheOrderConfirms(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kafka := testkit.NewKafka(t)
	adm := kafka.Admin(t)
	// A topic prefix of its own keeps this run apart from others on the
	// shared broker, as --topic-prefix does for the binaries.
	prefix := testkit.UniqueName(t, "e2e") + "."
	events := outbox.Writer{TopicPrefix: prefix}
	topics := []string{prefix + repair.Topic, prefix + "payment-events"}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topics...) })
	for _, topic := range topics {
		if _, err := adm.CreateTopic(ctx, 3, -1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Fatalf("create topic %s: %v", topic, err)
		}
	}
	kcfg := kafka.Config()

	// The order service's database: an order whose stock is reserved and
	// which waits for its payment.
	orders := testkit.NewPool(t)
	for _, m := range []func(context.Context, *pgxpool.Pool) error{outbox.Migrate, orderstore.Migrate, idempotent.Migrate} {
		if err := m(ctx, orders); err != nil {
			t.Fatal(err)
		}
	}
	ostore := &orderstore.Store{Pool: orders, Outbox: events}
	o, _, err := ostore.Create(ctx, order.Request{CustomerID: "c-1", Currency: "EUR",
		Items: []order.Item{{SKU: "sku-1", Quantity: 1, UnitPrice: 2500}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, orders, func(tx pgx.Tx) error {
		return events.Emitting(ctx, tx, func(out outbox.Emitter) error {
			_, err := orderstore.Apply(ctx, tx, out, o.ID, order.InventoryReserved, "", schemas.NewEventID())
			return err
		})
	}); err != nil {
		t.Fatal(err)
	}

	// The payment service's database: the charge succeeded at the provider,
	// the webhook was dropped, the row is still pending.
	payments := testkit.NewPool(t)
	for _, m := range []func(context.Context, *pgxpool.Pool) error{outbox.Migrate, paymentstore.Migrate, reconcilerstore.Migrate, idempotent.Migrate} {
		if err := m(ctx, payments); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := providersim.New(providersim.Config{Faults: providersim.DefaultFaults(), TickInterval: 2 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv)
	defer ts.Close()
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_e2e", BaseURL: ts.URL, HTTPClient: &http.Client{Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	charged, err := gw.CreateAndConfirm(ctx, paymentprovider.Intent{IdempotencyKey: "order-" + o.ID + "-charge", Amount: 2500,
		Currency: "eur", PaymentMethod: providersim.PaymentMethodVisa})
	if err != nil || charged.Status != paymentprovider.StatusSucceeded {
		t.Fatalf("charge: %v %+v", err, charged)
	}
	var paymentID int64
	if err := payments.QueryRow(ctx, `insert into payments (order_id, idempotency_key, provider_payment_id, amount, currency,
			status, created_at, updated_at)
		values ($1, $2, $3, 2500, 'EUR', 'pending', now() - interval '1 hour', now() - interval '1 hour') returning id`,
		o.ID, "order-"+o.ID+"-charge", charged.ProviderID).Scan(&paymentID); err != nil {
		t.Fatal(err)
	}

	// Detect, classify, record, command.
	rstore := reconcilerstore.New(payments)
	rstore.Outbox = events
	scanner, err := reconciler.NewScanner(reconciler.ScannerConfig{Store: rstore, Provider: reconcilerprovider.New(gw)})
	if err != nil {
		t.Fatal(err)
	}
	for cycle := 1; cycle <= 2; cycle++ {
		rep, err := scanner.RunCycle(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if cycle == 2 {
			want = 0 // the finding is open: the same drift is not recorded twice
		}
		if rep.FindingsOpened != want || rep.CommandsEmitted != want {
			t.Fatalf("cycle %d: %d findings, %d commands; want %d", cycle, rep.FindingsOpened, rep.CommandsEmitted, want)
		}
	}

	// The moving parts: relay, payment-svc's command consumer, the order
	// service's payment-events consumer.
	run := func(name string, f func(context.Context) error) {
		done := make(chan error, 1)
		go func() { done <- f(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	relay, err := publisher.New(publisher.Config{Pool: payments, Kafka: kcfg, Shards: 4, Workers: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	run("relay", relay.Run)
	var repairs idempotent.Mux
	repair.Register(&repairs, events)
	commands, err := idempotent.NewRunner(idempotent.Config{Group: testkit.UniqueName(t, "payment-svc"), Topics: []string{prefix + repair.Topic},
		Pool: payments, Kafka: kcfg, Handler: repairs.Handle, Outbox: events})
	if err != nil {
		t.Fatal(err)
	}
	run("payment commands", commands.Run)
	orderEvents, err := idempotent.NewRunner(idempotent.Config{Group: testkit.UniqueName(t, "order-svc"), Topics: []string{prefix + "payment-events"},
		Pool: orders, Kafka: kcfg, Handler: orderconsumer.BatchHandler().One(), Outbox: events})
	if err != nil {
		t.Fatal(err)
	}
	run("order events", orderEvents.Run)

	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := ostore.Get(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == order.StatusConfirmed {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("order %s still %s: the repair did not flow through", o.ID, got.Status)
		case <-tick.C:
		}
	}
	var status, resolution string
	var processed int
	if err := payments.QueryRow(ctx, `select p.status, f.resolution,
			(select count(*) from outbox where event_type = 'payment.processed')
		from payments p join reconciliation_findings f on f.payment_id = p.id where p.id = $1`, paymentID).
		Scan(&status, &resolution, &processed); err != nil {
		t.Fatal(err)
	}
	if status != "paid" || resolution != string(reconciler.ResolutionRepaired) || processed != 1 {
		t.Fatalf("payment %s, finding %s, %d payment.processed events; want paid, repaired, 1", status, resolution, processed)
	}
}
