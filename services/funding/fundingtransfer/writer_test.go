package fundingtransfer_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/services/brokersim"
	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/funding/fundingstream"
	"github.com/concordhq/concord/services/funding/fundingtest"
	"github.com/concordhq/concord/services/funding/fundingtransfer"
)

func hang(t *testing.T, rail *fundingtest.Rail, rate float64) {
	t.Helper()
	f := rail.Sim.Faults()
	f.HangRate = rate
	if err := rail.Sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}
}

func transfersOf(t *testing.T, rail *fundingtest.Rail, account string) []fundingbroker.Transfer {
	t.Helper()
	ts, err := rail.Client(5*time.Second).ListTransfers(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// The broker creates the transfer but the answer is lost, and the funding
// stream mirrors the transfer before the retry: the retry finds it in the
// account's list instead of creating a second, and the stream's record is
// folded into the intent's.
func TestARetryAfterATimeoutFindsTheTransferInsteadOfCreatingASecond(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 51})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = (&fundingstream.Consumer{Kind: fundingstream.Funding, Store: rail.Store, Broker: rail.Client(0), Backoff: 10 * time.Millisecond,
			CallTimeout: 200 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	acct := rail.Account()
	req := fundingtransfer.Request{RequestID: "dep-1", AccountID: acct, RelationshipID: "rel-1", Direction: fundingstore.Credit, Amount: 10000}

	hang(t, rail, 1)
	w := &fundingtransfer.Writer{Store: rail.Store, Broker: rail.Client(300 * time.Millisecond)}
	if _, err := w.Submit(context.Background(), req); !errors.Is(err, fundingtransfer.ErrUnknownOutcome) {
		t.Fatalf("submit with the answer lost: %v", err)
	}
	hang(t, rail, 0)
	fundingtest.Eventually(t, 20*time.Second, "the stream mirrors the transfer", func() (bool, string) {
		n := rail.Count(`select count(*) from funding_movements where domain = 'transfer' and intent_key is null`)
		return n == 1, fmt.Sprintf("%d mirrored", n)
	})
	m, err := w.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	ts := transfersOf(t, rail, acct)
	if len(ts) != 1 || ts[0].ID != m.BrokerID {
		t.Fatalf("broker transfers %+v, movement %+v; want one, bound to the intent", ts, m)
	}
	fundingtest.Eventually(t, 20*time.Second, "the deposit completes once", func() (bool, string) {
		n := rail.Count(`select count(*) from funding_movements where domain = 'transfer'`)
		c := rail.Count(`select count(*) from outbox where event_type = 'account.credited'`)
		return n == 1 && c == 1 && rail.Balance(acct) == 10000, fmt.Sprintf("%d movements, %d credits, balance %d", n, c, rail.Balance(acct))
	})
	if got, err := rail.Store.ByKey(context.Background(), fundingtransfer.Key(req)); err != nil || got.Status != funding.Completed {
		t.Fatalf("intent %+v, %v", got, err)
	}
}

// Two of the account's transfers could be the lost call's: nothing is
// guessed, nothing is called, the intent goes to review.
func TestAnAmbiguousLookupGoesToReviewAndCallsNothing(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 52})
	acct := rail.Account()
	req := fundingtransfer.Request{RequestID: "dep-2", AccountID: acct, RelationshipID: "rel-1", Direction: fundingstore.Credit, Amount: 5000}
	hang(t, rail, 1)
	w := &fundingtransfer.Writer{Store: rail.Store, Broker: rail.Client(300 * time.Millisecond)}
	if _, err := w.Submit(context.Background(), req); !errors.Is(err, fundingtransfer.ErrUnknownOutcome) {
		t.Fatalf("submit with the answer lost: %v", err)
	}
	hang(t, rail, 0)
	rail.Call(http.MethodPost, "/v1/accounts/"+acct+"/transfers", map[string]string{"transfer_type": "ach", "relationship_id": "rel-2",
		"amount": "50.00", "direction": "INCOMING"}, nil)
	if _, err := w.Submit(context.Background(), req); !errors.Is(err, fundingtransfer.ErrAmbiguous) {
		t.Fatalf("submit: %v, want ErrAmbiguous", err)
	}
	if ts := transfersOf(t, rail, acct); len(ts) != 2 {
		t.Fatalf("%d broker transfers, want the 2 there were", len(ts))
	}
	rs, err := rail.Store.Reviews(context.Background())
	if err != nil || len(rs) != 1 || rs[0].Reason != fundingtransfer.ReasonAmbiguous {
		t.Fatalf("reviews %+v, %v", rs, err)
	}
}
