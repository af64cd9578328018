package reconcilerstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/providersim"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerprovider"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

// newDB is a fresh payments database with the payment, outbox and
// reconciler migrations applied, in the order the binaries apply them.
func newDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate, reconcilerstore.Migrate)
}

// seed inserts n payments with the given status, provider ids ref(i), and
// created/updated an hour ago (outside the grace window). updated_at
// decreases with i so "latest by updated_at" has one answer.
func seed(t *testing.T, pool *pgxpool.Pool, n int, status string, ref func(i int) string) []int64 {
	t.Helper()
	ids := make([]int64, 0, n)
	for i := 1; i <= n; i++ {
		var id int64
		var pref *string
		if r := ref(i); r != "" {
			pref = &r
		}
		err := pool.QueryRow(context.Background(), `insert into payments
			(order_id, idempotency_key, provider_payment_id, amount, currency, status, created_at, updated_at)
			values (gen_random_uuid()::text, gen_random_uuid()::text, $1, 2500, 'EUR', $2,
			        now() - interval '1 hour', now() - interval '1 hour' - $3 * interval '1 second')
			returning id`, pref, status, i).Scan(&id)
		if err != nil {
			t.Fatalf("seed payment %d: %v", i, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	return testkit.Count(t, pool, sql, args...)
}

// fakeProvider is an in-memory provider for tests about the scan itself.
type fakeProvider struct {
	mu     sync.Mutex
	status map[string]string
	calls  int
	before func() // runs before every call, outside the lock
}

func newFake() *fakeProvider { return &fakeProvider{status: make(map[string]string)} }

func (f *fakeProvider) Get(ctx context.Context, id string) (reconciler.External, error) {
	if f.before != nil {
		f.before()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	s, ok := f.status[id]
	if !ok {
		return reconciler.External{}, fmt.Errorf("fake: %s: %w", id, reconciler.ErrProviderNotFound)
	}
	return reconciler.External{ProviderID: id, Status: s}, nil
}

func (f *fakeProvider) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func newScanner(t testing.TB, pool *pgxpool.Pool, p reconciler.Provider, mod func(*reconciler.ScannerConfig)) *reconciler.Scanner {
	t.Helper()
	cfg := reconciler.ScannerConfig{Store: reconcilerstore.New(pool), Provider: p, Batch: 200}
	if mod != nil {
		mod(&cfg)
	}
	s, err := reconciler.NewScanner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sim is provider-sim in-process behind httptest, with the reconciler's
// adapter and the payment service's gateway on it.
type sim struct {
	srv *providersim.Server
	gw  *paymentprovider.Client
	p   *reconcilerprovider.Provider
}

func newSim(t *testing.T, cfg providersim.Config) *sim {
	t.Helper()
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 2 * time.Millisecond
	}
	if cfg.Faults == (providersim.Faults{}) {
		cfg.Faults = providersim.DefaultFaults()
	}
	srv, err := providersim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { _ = srv.Close() })
	gw, err := paymentprovider.New(paymentprovider.Config{APIKey: "sk_test_reconciler", BaseURL: ts.URL,
		HTTPClient: &http.Client{Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return &sim{srv: srv, gw: gw, p: reconcilerprovider.New(gw)}
}

// charge creates and confirms a payment at the simulator.
func (s *sim) charge(t *testing.T, key, method string) paymentprovider.Payment {
	t.Helper()
	p, err := s.gw.CreateAndConfirm(context.Background(), paymentprovider.Intent{IdempotencyKey: key, Amount: 2500,
		Currency: "eur", PaymentMethod: method})
	if err != nil {
		t.Fatalf("charge %s: %v", key, err)
	}
	return p
}

func isConcurrent(err error) bool { return errors.Is(err, reconciler.ErrConcurrentRun) }
