package paymentapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/providersim"
)

// storeState is everything a webhook delivery may write: the stored
// provider events, the payment's row (every column), its transitions and
// the outbox.
type storeState struct {
	providerEvents int
	payment        string // the row as JSON
	transitions    int
	outbox         int
}

func (r *rig) state(t *testing.T, paymentID int64) storeState {
	t.Helper()
	var row string
	if err := r.pool.QueryRow(context.Background(), `select to_jsonb(p)::text from payments p where id = $1`, paymentID).Scan(&row); err != nil {
		t.Fatal(err)
	}
	return storeState{
		providerEvents: testkit.Count(t, r.pool, `select count(*) from provider_events`),
		payment:        row,
		transitions:    testkit.Count(t, r.pool, `select count(*) from payment_transitions where payment_id = $1`, paymentID),
		outbox:         testkit.Count(t, r.pool, `select count(*) from outbox`),
	}
}

// post sends body to the webhook endpoint with the given Stripe-Signature
// header (none when empty) and returns the status and the answer.
func (r *rig) post(t *testing.T, body []byte, signature string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.hook.URL+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if signature != "" {
		req.Header.Set("Stripe-Signature", signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(bytes.TrimSpace(answer))
}

// The endpoint acts only on deliveries signed with our secret, over the
// bytes received, recently. A delivery that fails any of these is answered
// 400 before anything is stored: no provider event, no transition, no
// payment event, the payment untouched. The provider's own success webhook
// for a pending payment is the body throughout, so each rejected delivery
// is one that would pay the payment if it were accepted; the same body,
// signed properly, then does (the control: the checks above can see a
// change).
func TestWebhookWithoutAValidSignatureChangesNothing(t *testing.T) {
	r := newRig(t)
	p, res, body := r.charge(t, "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d15")
	tampered := bytes.Replace(body, []byte(`"amount":1200`), []byte(`"amount":1`), 1)
	if bytes.Equal(tampered, body) {
		t.Fatalf("webhook body without the charge's amount: %s", body)
	}
	before := r.state(t, p.ID)
	if before.providerEvents != 0 || before.transitions != 0 || before.outbox != 0 {
		t.Fatalf("store before any delivery: %+v; want no provider events, transitions or outbox rows", before)
	}

	for _, tc := range []struct {
		name      string
		body      []byte
		signature string
	}{
		{"tampered body", tampered, providersim.SignatureHeader(secret, time.Now(), body)},
		{"wrong secret", body, providersim.SignatureHeader("whsec_someone_else", time.Now(), body)},
		{"missing header", body, ""},
		{"expired timestamp", body, providersim.SignatureHeader(secret, time.Now().Add(-paymentprovider.WebhookTolerance-time.Minute), body)},
		{"timestamp from the future", body, providersim.SignatureHeader(secret, time.Now().Add(paymentprovider.WebhookTolerance+time.Minute), body)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, answer := r.post(t, tc.body, tc.signature); code != http.StatusBadRequest {
				t.Errorf("answered %d %q; want 400", code, answer)
			}
			if after := r.state(t, p.ID); after != before {
				t.Errorf("store changed by a rejected delivery:\n before %+v\n after  %+v", before, after)
			}
		})
	}

	t.Run("valid signature", func(t *testing.T) {
		code, answer := r.post(t, body, providersim.SignatureHeader(secret, time.Now(), body))
		if code != http.StatusOK || !bytes.Contains([]byte(answer), []byte(`"result":"applied"`)) {
			t.Fatalf("answered %d %q; want 200 applied", code, answer)
		}
		after := r.state(t, p.ID)
		if after.providerEvents != 1 || after.transitions != 1 || after.outbox != 1 {
			t.Fatalf("store after the signed delivery: %+v; want one provider event, transition and outbox row", after)
		}
		if a, n := r.applied(t, eventID(t, body)); a != "applied" || n != 1 {
			t.Fatalf("provider event applied %q after %d deliveries; want applied after 1 (rejected deliveries are not counted)", a, n)
		}
		if got, err := paymentstore.Get(context.Background(), r.pool, p.ID); err != nil || got.Status != payment.StatusPaid || got.ProviderPaymentID != res.ProviderID {
			t.Fatalf("payment after the signed delivery: %+v, %v; want paid with %s", got, err, res.ProviderID)
		}
	})
}
