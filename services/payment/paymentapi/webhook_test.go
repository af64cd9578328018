package paymentapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentapi"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/providersim"
)

const secret = "whsec_webhook_test"

// rig is a payments database, the webhook endpoint on it, and provider-sim
// sending its webhooks to a recorder instead, so a test decides when (and
// how often) each is delivered.
type rig struct {
	pool *pgxpool.Pool
	hook *httptest.Server
	gw   *paymentprovider.Client
	mu   sync.Mutex
	sent map[string][]byte // event type → last body the provider sent
}

func newRig(t *testing.T) *rig { return newRigWith(t, providersim.Config{}) }

// newRigWith is newRig with a simulator configured by cfg (its webhook
// fields and faults are the rig's).
func newRigWith(t *testing.T, cfg providersim.Config) *rig {
	t.Helper()
	r := &rig{pool: testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate), sent: map[string][]byte{}}
	wh, err := paymentapi.NewWebhook(r.pool, outbox.Writer{}, secret, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	wh.Register(mux)
	r.hook = httptest.NewServer(mux)
	t.Cleanup(r.hook.Close)
	recorder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev struct{ Type string }
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		r.sent[ev.Type] = body
		r.mu.Unlock()
	}))
	t.Cleanup(recorder.Close)
	cfg.WebhookEndpoints, cfg.WebhookSecret, cfg.WebhookEvents = []string{recorder.URL}, secret, paymentapi.Events
	cfg.Faults = providersim.DefaultFaults()
	sim, err := providersim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim)
	t.Cleanup(simSrv.Close)
	t.Cleanup(func() { _ = sim.Close() })
	if r.gw, err = paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_webhook", BaseURL: simSrv.URL}); err != nil {
		t.Fatal(err)
	}
	return r
}

// charge creates an intent row and charges it at the provider, returning
// the payment and the provider's answer, and waits for the provider's
// payment_intent.succeeded webhook to be recorded (not delivered).
func (r *rig) charge(t *testing.T, order string) (paymentstore.Payment, paymentprovider.Payment, []byte) {
	return r.chargeTraced(t, order, "")
}

// chargeTraced is charge of a payment created in the trace traceparent.
func (r *rig) chargeTraced(t *testing.T, order, traceparent string) (paymentstore.Payment, paymentprovider.Payment, []byte) {
	t.Helper()
	ctx := context.Background()
	var p paymentstore.Payment
	if err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) (err error) {
		p, _, err = paymentstore.CreateIntent(ctx, tx, paymentstore.NewIntent{OrderID: order, Amount: 1200, Currency: "EUR", Traceparent: traceparent})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	res, err := r.gw.CreateAndConfirm(ctx, paymentprovider.Intent{IdempotencyKey: p.IdempotencyKey, Amount: 1200, Currency: "eur",
		PaymentMethod: providersim.PaymentMethodVisa, Metadata: map[string]string{"payment_id": strconv.FormatInt(p.ID, 10)}})
	if err != nil || res.Status != paymentprovider.StatusSucceeded {
		t.Fatalf("charge: %+v, %v", res, err)
	}
	testkit.Eventually(t, 5*time.Second, "the success webhook", func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if b := r.sent["payment_intent.succeeded"]; b == nil || !bytes.Contains(b, []byte(res.ProviderID)) {
			return errors.New("not sent yet")
		}
		return nil
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return p, res, r.sent["payment_intent.succeeded"]
}

// deliver posts body to the webhook endpoint, signed now, and returns the
// result it reports.
func (r *rig) deliver(t *testing.T, body []byte) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.hook.URL+"/webhooks/stripe", bytes.NewReader(body))
	req.Header.Set("Stripe-Signature", providersim.SignatureHeader(secret, time.Now(), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Result string }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook answered %d", resp.StatusCode)
	}
	return out.Result
}

func (r *rig) applied(t *testing.T, eventID string) (applied string, deliveries int) {
	t.Helper()
	var a *string
	if err := r.pool.QueryRow(context.Background(), `select applied, deliveries from provider_events where id = $1`, eventID).Scan(&a, &deliveries); err != nil {
		t.Fatal(err)
	}
	if a != nil {
		applied = *a
	}
	return applied, deliveries
}

func eventID(t *testing.T, body []byte) string {
	var ev struct{ ID string }
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		t.Fatalf("webhook body without id: %s", body)
	}
	return ev.ID
}

// The success webhook alone moves a pending payment to paid, once:
// whether or not the charger's processing answer attached the provider's
// id before.
func TestWebhookAppliesSuccessOnce(t *testing.T) {
	for i, attached := range []bool{false, true} {
		t.Run("attached="+strconv.FormatBool(attached), func(t *testing.T) {
			r := newRig(t)
			p, res, body := r.charge(t, "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d1"+strconv.Itoa(i))
			if attached {
				if err := pgx.BeginFunc(context.Background(), r.pool, func(tx pgx.Tx) error {
					return paymentstore.AttachProvider(context.Background(), tx, p.ID, res.ProviderID)
				}); err != nil {
					t.Fatal(err)
				}
			}
			if got := r.deliver(t, body); got != "applied" {
				t.Fatalf("first delivery: %s; want applied", got)
			}
			if got := r.deliver(t, body); got != "duplicate" {
				t.Fatalf("second delivery: %s; want duplicate", got)
			}
			got, _ := paymentstore.Get(context.Background(), r.pool, p.ID)
			if got.Status != payment.StatusPaid || got.Version != 1 || got.ProviderPaymentID != res.ProviderID {
				t.Fatalf("payment after two deliveries: %s v%d %q; want paid v1 %s", got.Status, got.Version, got.ProviderPaymentID, res.ProviderID)
			}
			if a, n := r.applied(t, eventID(t, body)); a != "applied" || n != 2 {
				t.Fatalf("provider event applied %q after %d deliveries; want applied after 2", a, n)
			}
		})
	}
}

// A webhook for a payment the charger already recorded changes nothing,
// but its observation is kept and the event is marked.
func TestWebhookAfterTheChargersAnswerChangesNothing(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p, res, body := r.charge(t, "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d12")
	if err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		_, err := paymentstore.Record(ctx, tx, outbox.Writer{}, p.ID, paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: res.ProviderID, Observed: "processing-as-seen-by-sync", Source: "sync"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := r.deliver(t, body); got != "unchanged" {
		t.Fatalf("delivery after the sync path: %s; want unchanged", got)
	}
	got, _ := paymentstore.Get(ctx, r.pool, p.ID)
	if got.Version != 1 || got.ObservedStatus != "succeeded" {
		t.Fatalf("payment v%d observed %q; want v1 (no second transition) observed succeeded", got.Version, got.ObservedStatus)
	}
	if a, _ := r.applied(t, eventID(t, body)); a != "unchanged" {
		t.Fatalf("provider event applied = %q; want unchanged", a)
	}
	var events int
	_ = r.pool.QueryRow(ctx, `select count(*) from outbox`).Scan(&events)
	if events != 1 {
		t.Fatalf("%d payment events; want the sync path's one", events)
	}
}

// The event is stored before it is applied, outside the applying
// transaction. A delivery whose application failed after the store (a
// crash, a lost connection) is applied when the provider delivers again,
// not answered "duplicate".
func TestWebhookStoredButNotAppliedIsAppliedOnRedelivery(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p, res, body := r.charge(t, "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d13")
	pending, _, found, err := paymentstore.Receive(ctx, r.pool, paymentstore.ProviderEvent{ID: eventID(t, body),
		Type: "payment_intent.succeeded", ProviderPaymentID: res.ProviderID, PaymentID: p.ID, Payload: body})
	if err != nil || !pending || !found {
		t.Fatalf("Receive: pending %v found %v err %v", pending, found, err)
	}
	if got := r.deliver(t, body); got != "applied" {
		t.Fatalf("redelivery of a stored, unapplied event: %s; want applied", got)
	}
	if got, _ := paymentstore.Get(ctx, r.pool, p.ID); got.Status != payment.StatusPaid {
		t.Fatalf("payment %s; want paid", got.Status)
	}
}

// A success webhook for a payment already tied to another provider payment
// (found through the intent's metadata) is two charges for one order: it is
// recorded for the reconciler, not treated as news that changes nothing.
func TestWebhookForAnotherProviderPaymentIsAMismatch(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p, _, body := r.charge(t, "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d14")
	if err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		_, err := paymentstore.Record(ctx, tx, outbox.Writer{}, p.ID, paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: "pi_other", Observed: "succeeded", Source: "sync"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if got := r.deliver(t, body); got != "provider_mismatch" {
		t.Fatalf("success webhook for another provider payment: %s; want provider_mismatch", got)
	}
}
