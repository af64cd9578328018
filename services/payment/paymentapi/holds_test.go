package paymentapi_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/providersim"
)

// sentFor waits until the provider sent an event of typ about providerID
// and returns its body.
func (r *rig) sentFor(t *testing.T, typ, providerID string) []byte {
	t.Helper()
	var body []byte
	testkit.Eventually(t, 5*time.Second, typ+" webhook", func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if b := r.sent[typ]; b != nil && bytes.Contains(b, []byte(providerID)) {
			body = b
			return nil
		}
		return errors.New("not sent yet")
	})
	return body
}

// newHold stores a hold's row as the authorize command's handler does,
// and places the hold at the provider without telling the row (the
// holder's answer lost): only the webhook can.
func (r *rig) newHold(t *testing.T, amount int64) (string, paymentprovider.Payment) {
	t.Helper()
	return r.newHoldTraced(t, amount, "")
}

// newHoldTraced is newHold of a hold whose authorize command was received
// in the trace traceparent.
func (r *rig) newHoldTraced(t *testing.T, amount int64, traceparent string) (string, paymentprovider.Payment) {
	t.Helper()
	ctx := context.Background()
	saga := schemas.NewEventID()
	key := saga + ":reserve_credit"
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		_, _, err := paymentstore.ReceiveHoldCommand(ctx, tx, paymentstore.HoldCommand{Key: key, Type: contract.TypePaymentAuthorizeHold,
			CommandID: schemas.NewEventID(), SagaID: saga, Step: "reserve_credit", HoldKey: key, Amount: amount, Currency: "EUR", Traceparent: traceparent},
			&paymentstore.Hold{Key: key, SagaID: saga, OrderID: saga, Amount: amount, Currency: "EUR", PaymentMethod: providersim.PaymentMethodVisa})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.gw.Authorize(ctx, paymentprovider.Intent{IdempotencyKey: key, Amount: amount, Currency: "eur",
		PaymentMethod: providersim.PaymentMethodVisa, Metadata: map[string]string{"hold_key": key}})
	if err != nil || res.Status != paymentprovider.StatusAuthorized {
		t.Fatalf("authorize: %v %+v", err, res)
	}
	return key, res
}

func holdOf(t *testing.T, r *rig, key string) paymentstore.Hold {
	t.Helper()
	h, found, err := paymentstore.HoldByKey(context.Background(), r.pool, key)
	if err != nil || !found {
		t.Fatalf("hold %s: %v %v", key, found, err)
	}
	return h
}

func TestHoldWebhooksMoveTheHoldRowForwardOnly(t *testing.T) {
	clock := providersim.NewManualClock(time.Now().Truncate(time.Second))
	r := newRigWith(t, providersim.Config{Clock: clock, TickInterval: 2 * time.Millisecond, HoldExpiry: time.Minute})
	key, res := r.newHold(t, 1500)

	authorized := r.sentFor(t, "payment_intent.amount_capturable_updated", res.ProviderID)
	if got := r.deliver(t, authorized); got != "applied" {
		t.Fatalf("amount_capturable_updated: %s, want applied", got)
	}
	if h := holdOf(t, r, key); h.Status != payment.HoldAuthorized || h.ProviderPaymentID != res.ProviderID || h.ObservedStatus != "requires_capture" {
		t.Fatalf("hold after the authorization webhook: %+v", h)
	}

	clock.Advance(time.Minute)
	expired := r.sentFor(t, "payment_intent.canceled", res.ProviderID)
	if got := r.deliver(t, expired); got != "applied" {
		t.Fatalf("canceled: %s, want applied", got)
	}
	if h := holdOf(t, r, key); h.Status != payment.HoldExpired {
		t.Fatalf("hold after expiry: %+v, want expired", h)
	}
	// A late authorization webhook (reordered) does not bring it back, and
	// a repeated delivery is a duplicate.
	if got := r.deliver(t, authorized); got != "duplicate" {
		t.Fatalf("authorization delivered again: %s, want duplicate", got)
	}
	id := eventID(t, authorized)
	stale := bytes.Replace(authorized, []byte(`"`+id+`"`), []byte(`"`+id+`_late"`), 1)
	if got := r.deliver(t, stale); got != "unchanged" {
		t.Fatalf("a stale authorization event: %s, want unchanged", got)
	}
	if h := holdOf(t, r, key); h.Status != payment.HoldExpired {
		t.Fatalf("hold after a stale webhook: %+v", h)
	}
}

func TestCancelWebhookMarksAHeldPaymentReleased(t *testing.T) {
	r := newRig(t)
	key, res := r.newHold(t, 700)
	if _, err := r.gw.CancelHold(context.Background(), res.ProviderID, key+"_compensate"); err != nil {
		t.Fatal(err)
	}
	if got := r.deliver(t, r.sentFor(t, "payment_intent.canceled", res.ProviderID)); got != "applied" {
		t.Fatalf("canceled: %s", got)
	}
	if h := holdOf(t, r, key); h.Status != payment.HoldReleased || h.ProviderPaymentID != res.ProviderID {
		t.Fatalf("hold: %+v, want released", h)
	}
}
