package fundingpoll_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/services/brokersim"
	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingpoll"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/funding/fundingtest"
)

// calls records the paths a client requests and when.
type calls struct {
	mu    sync.Mutex
	paths []string
	at    []time.Time
}

func (c *calls) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths = append(c.paths, r.URL.Path)
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (c *calls) snapshot() ([]string, []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...), append([]time.Time(nil), c.at...)
}

type wallet struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Wallet transfers send no events: the poller brings them to their
// broker status, asking only about records the broker is not done with,
// and spreads its calls across the interval.
func TestPollersAskOnlyAboutOpenRecordsSpreadAcrossTheInterval(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 21, SettlementDelay: 30 * time.Millisecond})
	ctx := context.Background()
	acct := rail.Account()
	var open []string
	for _, amount := range []string{"10.00", "20.00"} {
		var w wallet
		rail.Call(http.MethodPost, "/v1beta/demo/banking/funding", map[string]string{"account_id": acct, "amount": amount}, &w)
		cents, _ := fundingbroker.ParseCents(amount)
		if _, err := rail.Store.Report(ctx, fundingstore.News{Domain: funding.WalletTransfer, BrokerID: w.ID, BrokerStatus: w.Status, Source: "test",
			Details: &fundingstore.Movement{AccountID: acct, Direction: fundingstore.Credit, Amount: cents, Currency: "USD"}}); err != nil {
			t.Fatal(err)
		}
		open = append(open, w.ID)
	}
	// A final record the broker would not even know: asking about it
	// would fail the round.
	if _, err := rail.Store.Report(ctx, fundingstore.News{Domain: funding.WalletTransfer, BrokerID: "w-failed", BrokerStatus: "FAILED", Source: "test",
		Details: &fundingstore.Movement{AccountID: acct, Direction: fundingstore.Debit, Amount: 100, Currency: "USD"}}); err != nil {
		t.Fatal(err)
	}

	rec := &calls{}
	c := rail.Client(5 * time.Second)
	c.HTTP.Transport = rec
	const interval = 200 * time.Millisecond
	p := &fundingpoll.Poller{Store: rail.Store, Broker: c, Interval: interval, CompletedWindow: time.Nanosecond}
	fundingtest.Eventually(t, 20*time.Second, "wallet transfers complete", func() (bool, string) {
		n, err := p.Round(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n == 0, fmt.Sprintf("%d still open, balance %d", n, rail.Balance(acct))
	})
	if got, cash := rail.Balance(acct), rail.BrokerCash(acct); got != 3000 || cash != 3000 {
		t.Fatalf("projected %d, broker %d, want 3000", got, cash)
	}
	paths, at := rec.snapshot()
	for _, path := range paths {
		if !strings.Contains(path, open[0]) && !strings.Contains(path, open[1]) {
			t.Fatalf("polled %s, a record the broker is done with", path)
		}
	}
	// The first round asked about both, half an interval apart.
	if len(at) < 2 || at[1].Sub(at[0]) < interval/2 {
		t.Fatalf("calls at %v: not spread across the interval", at)
	}
}
