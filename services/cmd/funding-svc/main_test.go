package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/services/brokersim"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingprojection"
	"github.com/concordhq/concord/services/funding/fundingtest"
	"github.com/concordhq/concord/services/reconciler/fundingrepair"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs funding-svc (no relay unless extra says so: the outbox is
// checked in the database) until the returned stop is called; extra flags
// override the defaults.
func start(t *testing.T, dbURL, brokerURL, firm, addr string, extra ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := run(ctx, append([]string{"--database-url", dbURL, "--broker-url", brokerURL, "--broker-key-id", "CK_TEST", "--broker-secret", "secret",
			"--firm-account", firm, "--http-addr", addr, "--ops-addr", "127.0.0.1:0", "--relay=false", "--create-topics=false", "--poll-interval", "100ms",
			"--shutdown-grace", "2s"}, extra...))
		if err != nil && ctx.Err() == nil {
			t.Errorf("funding-svc: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// accountBalance is GET /v1/funding/accounts/{account_id}/balance.
type accountBalance struct {
	Balance    int64                     `json:"balance"`
	Projection fundingprojection.Balance `json:"projection"`
}

func balances(addr, account string) (accountBalance, error) {
	var b accountBalance
	res, err := http.Get("http://" + addr + "/v1/funding/accounts/" + account + "/balance")
	if err != nil {
		return b, err
	}
	defer res.Body.Close()
	err = json.NewDecoder(res.Body).Decode(&b)
	return b, err
}

func balance(addr, account string) (int64, error) {
	b, err := balances(addr, account)
	return b.Balance, err
}

// A deposit through the API is credited once the journal stream says it
// executed; the service is stopped, journals execute meanwhile, and the
// restarted service catches up from its cursors.
func TestDepositThroughTheAPIAndCatchUpAfterARestart(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 41})
	dbURL := testkit.NewDatabase(t, testkit.PostgresURL(t))
	acct := rail.Account()
	addr := freeAddr(t)
	stop := start(t, dbURL, rail.HTTP.URL, rail.Firm, addr)

	body, _ := json.Marshal(map[string]any{"request_id": "r-1", "account_id": acct, "kind": "deposit", "amount": 2500})
	fundingtest.Eventually(t, 30*time.Second, "the API answers", func() (bool, string) {
		res, err := http.Post("http://"+addr+"/v1/funding/journals", "application/json", bytes.NewReader(body))
		if err != nil {
			return false, err.Error()
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, res.Status
	})
	wantBalance := func(want int64) {
		t.Helper()
		fundingtest.Eventually(t, 30*time.Second, "balance converges", func() (bool, string) {
			b, err := balance(addr, acct)
			return err == nil && b == want, fmt.Sprintf("balance %d (want %d), %v", b, want, err)
		})
	}
	wantBalance(2500)

	stop()
	c := rail.Client(5 * time.Second)
	for i := range 3 {
		if _, err := c.CreateJournal(context.Background(), fundingbroker.JournalRequest{FromAccount: rail.Firm, ToAccount: acct, Amount: 100,
			Description: fmt.Sprintf("while down %d", i)}, fmt.Sprintf("down-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	start(t, dbURL, rail.HTTP.URL, rail.Firm, addr)
	wantBalance(2800)
}

// An ACH deposit through the API completes, the bank returns it, and the
// service's projection follows both.
func TestAnACHDepositThroughTheAPIIsCreditedThenReversedOnReturn(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 42})
	dbURL := testkit.NewDatabase(t, testkit.PostgresURL(t))
	acct := rail.Account()
	addr := freeAddr(t)
	start(t, dbURL, rail.HTTP.URL, rail.Firm, addr)
	body, _ := json.Marshal(map[string]any{"request_id": "ach-1", "account_id": acct, "relationship_id": "rel-1", "kind": "deposit", "amount": 7000})
	var m struct {
		BrokerID string `json:"broker_id"`
	}
	fundingtest.Eventually(t, 30*time.Second, "the API answers", func() (bool, string) {
		res, err := http.Post("http://"+addr+"/v1/funding/transfers", "application/json", bytes.NewReader(body))
		if err != nil {
			return false, err.Error()
		}
		defer res.Body.Close()
		_ = json.NewDecoder(res.Body).Decode(&m)
		return res.StatusCode == http.StatusOK && m.BrokerID != "", res.Status
	})
	fundingtest.Eventually(t, 30*time.Second, "credited", func() (bool, string) {
		b, err := balance(addr, acct)
		return err == nil && b == 7000, fmt.Sprintf("balance %d, %v", b, err)
	})
	if err := rail.Sim.ReturnTransfer(context.Background(), m.BrokerID, ""); err != nil {
		t.Fatal(err)
	}
	fundingtest.Eventually(t, 30*time.Second, "reversed", func() (bool, string) {
		b, err := balance(addr, acct)
		return err == nil && b == 0, fmt.Sprintf("balance %d, %v", b, err)
	})
}

// With its relay on, funding-svc's own consumer of account-events builds
// the projection its balance endpoint answers: a deposit and a withdrawal
// by journal, each an account.* event through Kafka, project to the
// balance the entries give.
func TestTheBalanceEndpointAnswersTheProjectionBuiltFromAccountEvents(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 43})
	dbURL := testkit.NewDatabase(t, testkit.PostgresURL(t))
	acct := rail.Account()
	addr := freeAddr(t)
	prefix := testkit.UniqueName(t, "fsvc") + "."
	adm := testkit.NewKafka(t).Admin(t)
	t.Cleanup(func() {
		_, _ = adm.DeleteTopics(context.Background(), prefix+fundingprojection.Topic, prefix+fundingrepair.Topic)
	})
	start(t, dbURL, rail.HTTP.URL, rail.Firm, addr, "--relay=true", "--create-topics=true", "--topic-prefix", prefix, "--topic-partitions", "2")
	for _, req := range []map[string]any{
		{"request_id": "d-1", "account_id": acct, "kind": "deposit", "amount": 2500},
		{"request_id": "w-1", "account_id": acct, "kind": "withdrawal", "amount": 1000},
	} {
		body, _ := json.Marshal(req)
		fundingtest.Eventually(t, 30*time.Second, "the API takes "+req["request_id"].(string), func() (bool, string) {
			res, err := http.Post("http://"+addr+"/v1/funding/journals", "application/json", bytes.NewReader(body))
			if err != nil {
				return false, err.Error()
			}
			res.Body.Close()
			return res.StatusCode == http.StatusOK, res.Status
		})
	}
	fundingtest.Eventually(t, 60*time.Second, "the projection applies both events", func() (bool, string) {
		b, err := balances(addr, acct)
		return err == nil && b.Balance == 1500 && b.Projection.Balance == 1500 && b.Projection.Events == 2,
			fmt.Sprintf("balance %d, projection %+v, %v", b.Balance, b.Projection, err)
	})
}
