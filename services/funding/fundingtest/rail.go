// Package fundingtest holds the broker rail of funding-svc's tests: a
// broker-sim in process behind httptest, a fresh database with the
// funding tables, and the clients and helpers the tests share.
package fundingtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/brokersim"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingstore"
)

// Rail is a broker-sim, its HTTP server and a funding store.
type Rail struct {
	T     testing.TB
	Sim   *brokersim.Server
	HTTP  *httptest.Server
	Pool  *pgxpool.Pool
	Store *fundingstore.Store
	Firm  string
}

// New starts a broker-sim with cfg (settlement every 20ms and no rate
// limit unless cfg says otherwise) and a fresh funding database.
func New(t testing.TB, cfg brokersim.Config) *Rail {
	t.Helper()
	if cfg.SettlementDelay == 0 {
		cfg.SettlementDelay = 20 * time.Millisecond
	}
	if cfg.RateLimit == 0 {
		cfg.RateLimit = -1
	}
	if cfg.TickInterval == 0 {
		cfg.TickInterval = 5 * time.Millisecond
	}
	cfg.Admin = true
	sim, err := brokersim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(sim)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		_ = sim.Close()
		hs.Close()
	})
	pool := testkit.NewPool(t, outbox.Migrate, fundingstore.Migrate)
	return &Rail{T: t, Sim: sim, HTTP: hs, Pool: pool, Store: &fundingstore.Store{Pool: pool}, Firm: sim.FirmAccountID()}
}

// Client is a broker client; timeout 0 means none (for streams).
func (r *Rail) Client(timeout time.Duration) *fundingbroker.Client {
	return &fundingbroker.Client{BaseURL: r.HTTP.URL, KeyID: "CK_TEST", Secret: "secret", HTTP: &http.Client{Timeout: timeout}}
}

// Call sends a JSON request to the simulator and decodes its 2xx answer
// into out.
func (r *Rail) Call(method, path string, body, out any) {
	r.T.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, r.HTTP.URL+path, rd)
	req.SetBasicAuth("CK_TEST", "secret")
	req.Header.Set("Content-Type", "application/json")
	res, err := r.HTTP.Client().Do(req)
	if err != nil {
		r.T.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		r.T.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			r.T.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// Account opens a customer account at the broker.
func (r *Rail) Account() string {
	var a struct {
		ID string `json:"id"`
	}
	r.Call(http.MethodPost, "/v1/accounts", map[string]any{}, &a)
	return a.ID
}

// BrokerCash is the account's cash at the broker, in cents.
func (r *Rail) BrokerCash(account string) int64 {
	var a struct {
		Cash string `json:"cash"`
	}
	r.Call(http.MethodGet, "/v1/trading/accounts/"+account+"/account", nil, &a)
	c, err := fundingbroker.ParseCents(a.Cash)
	if err != nil {
		r.T.Fatal(err)
	}
	return c
}

// Balance is the account's projected balance in the store.
func (r *Rail) Balance(account string) int64 {
	r.T.Helper()
	b, err := r.Store.Balance(context.Background(), account, "USD")
	if err != nil {
		r.T.Fatal(err)
	}
	return b
}

// Eventually is testkit.Eventually for a condition that describes the
// state it saw.
func Eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	testkit.Eventually(t, within, what, func() error {
		if ok, state := cond(); !ok {
			return errors.New(state)
		}
		return nil
	})
}

// Count runs a counting query on the store's database.
func (r *Rail) Count(q string, args ...any) int {
	r.T.Helper()
	var n int
	if err := r.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		r.T.Fatal(fmt.Errorf("%s: %w", q, err))
	}
	return n
}
