package charger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/charger"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/providersim"
)

// providerTimeout bounds one provider call of the charger under test: the
// wait for an answer the provider withholds.
const providerTimeout = time.Second

// attempts records, at the provider's door, the Idempotency-Key of every
// create-and-confirm call per order (metadata[order_id]), in arrival order.
// With lose set it also plays a provider whose first answer per order is
// lost after the PaymentIntent was created: that request is executed by
// the simulator and answered with a 500.
type attempts struct {
	next http.Handler
	lose bool

	mu   sync.Mutex
	keys map[string][]string
}

func (a *attempts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/payment_intents" {
		a.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	order := form.Get("metadata[order_id]")
	a.mu.Lock()
	a.keys[order] = append(a.keys[order], r.Header.Get("Idempotency-Key"))
	first := len(a.keys[order]) == 1
	a.mu.Unlock()
	if !a.lose || !first {
		a.next.ServeHTTP(w, r)
		return
	}
	executed := httptest.NewRecorder()
	a.next.ServeHTTP(executed, r)
	if executed.Code != http.StatusOK {
		http.Error(w, fmt.Sprintf("the simulator refused the first attempt: %d %s", executed.Code, executed.Body), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = io.WriteString(w, `{"error": {"type": "api_error", "message": "answer lost after the payment was created (test)"}}`)
}

func (a *attempts) of(order string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.keys[order]...)
}

// run starts c and stops it when the test ends.
func run(t *testing.T, c *charger.Charger) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("charger: %v", err)
		}
	})
}

// intents stores a pending payment per order, to be paid with a card that
// succeeds.
func intents(t *testing.T, pool *pgxpool.Pool, orders []string) map[string]paymentstore.Payment {
	t.Helper()
	out := make(map[string]paymentstore.Payment, len(orders))
	for _, o := range orders {
		if err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
			p, _, err := paymentstore.CreateIntent(context.Background(), tx, paymentstore.NewIntent{OrderID: o, Amount: 1999,
				Currency: "EUR", CustomerID: "c1", PaymentMethod: providersim.PaymentMethodVisa})
			out[o] = p
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// paid is nil once every order's payment is paid.
func paid(pool *pgxpool.Pool, orders ...string) error {
	for _, o := range orders {
		p, err := paymentstore.ByOrder(context.Background(), pool, o)
		if err != nil {
			return err
		}
		if p.Status != payment.StatusPaid {
			return fmt.Errorf("order %s: payment %s after %d attempts", o, p.Status, p.Attempts)
		}
	}
	return nil
}

// providerPayments lists every PaymentIntent the provider holds, by the
// order its metadata names.
func providerPayments(t *testing.T, gw *paymentprovider.Client) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	now := time.Now()
	for next := ""; ; {
		page, err := gw.ListCreated(context.Background(), now.Add(-time.Hour), now.Add(time.Hour), next, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Items {
			out[p.Metadata["order_id"]] = append(out[p.Metadata["order_id"]], p.ProviderID)
		}
		if !page.HasMore {
			return out
		}
		next = page.Next
	}
}

// A charge whose answer the provider withheld after creating the
// PaymentIntent (the call timed out, or came back a 5xx) is retried with
// the key of the first attempt, so the provider replays that payment
// instead of creating another: one PaymentIntent per order, whatever the
// charger did not hear. A key that changes per attempt (say, with a
// timestamp in it) charges the customer once per lost answer.
func TestChargerRetriesALostAnswerWithTheSameKeyAndTheProviderChargesOnce(t *testing.T) {
	for _, lost := range []string{"timeout", "5xx"} {
		t.Run(lost, func(t *testing.T) { testLostAnswer(t, lost) })
	}
}

// provider is a simulator with faults behind the attempts door (which
// loses each order's first answer when lose is set), and the gateway to it.
func provider(t *testing.T, faults providersim.Faults, lose bool) (*providersim.Server, *attempts, *paymentprovider.Client) {
	t.Helper()
	sim, err := providersim.New(providersim.Config{Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	door := &attempts{next: sim, lose: lose, keys: map[string][]string{}}
	ts := httptest.NewServer(door)
	t.Cleanup(ts.Close)
	// Closing the simulator first releases the requests it still holds.
	t.Cleanup(func() { _ = sim.Close() })
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_charger", BaseURL: ts.URL, Timeout: providerTimeout})
	if err != nil {
		t.Fatal(err)
	}
	return sim, door, gw
}

func testLostAnswer(t *testing.T, lost string) {
	pool := testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate)
	faults := providersim.DefaultFaults()
	if lost == "timeout" {
		// Every call is executed and its answer withheld until the
		// charger gives up on it, until the test lets answers through.
		faults.HangRate = 1
	}
	sim, door, gw := provider(t, faults, lost == "5xx")

	orders := []string{"0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d01", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d02", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d03"}
	stored := intents(t, pool, orders)
	c, err := charger.New(charger.Config{Pool: pool, Outbox: outbox.Writer{}, Gateway: gw, PollInterval: 20 * time.Millisecond,
		Lease: 10 * providerTimeout, MaxBackoff: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, c)

	if lost == "timeout" {
		testkit.Eventually(t, 10*time.Second, "the first charge of every order executed with its answer withheld", func() error {
			if hung := sim.Stats().Hung; hung < int64(len(orders)) {
				return fmt.Errorf("%d answers withheld; want %d", hung, len(orders))
			}
			return nil
		})
		if err := sim.SetFaults(providersim.DefaultFaults()); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 20*time.Second, "every payment recorded paid", func() error { return paid(pool, orders...) })

	held := providerPayments(t, gw)
	var errs []error
	for _, o := range orders {
		p, err := paymentstore.ByOrder(context.Background(), pool, o)
		if err != nil {
			t.Fatal(err)
		}
		if pis := held[o]; len(pis) != 1 || pis[0] != p.ProviderPaymentID {
			errs = append(errs, fmt.Errorf("order %s: the provider holds PaymentIntents %v, the payment is tied to %q; want exactly that one", o, pis, p.ProviderPaymentID))
		}
		keys := door.of(o)
		if len(keys) < 2 {
			errs = append(errs, fmt.Errorf("order %s: %d create-and-confirm calls; want a retry after the lost answer", o, len(keys)))
		}
		for i, k := range keys {
			if k != stored[o].IdempotencyKey {
				errs = append(errs, fmt.Errorf("order %s: attempt %d of %d sent Idempotency-Key %q; want the intent's %q on every attempt",
					o, i+1, len(keys), k, stored[o].IdempotencyKey))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
