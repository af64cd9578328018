package fundingjournal_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/concordhq/concord/services/brokersim"
	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingjournal"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/funding/fundingtest"
)

func journalsOf(t *testing.T, c *fundingbroker.Client, account string) []fundingbroker.Journal {
	t.Helper()
	js, err := c.ListJournals(context.Background(), fundingbroker.JournalFilter{ToAccount: account})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestKeyIsDeterministicAndWithinTheBrokersLimit(t *testing.T) {
	long := string(make([]byte, 500))
	r := fundingjournal.Request{RequestID: long, AccountID: long, Direction: fundingstore.Credit, Amount: 1}
	if k := fundingjournal.Key(r); len(k) > fundingstore.MaxKey || k != fundingjournal.Key(r) {
		t.Fatalf("key %q (%d characters)", k, len(k))
	}
	other := r
	other.RequestID += "x"
	if fundingjournal.Key(other) == fundingjournal.Key(r) {
		t.Fatal("two requests share a key")
	}
}

// The broker executes the journal but its answer never comes: the retry —
// by the same writer, or by another after a restart — finds the journal by
// its key instead of creating a second one.
func TestRetryAfterATimeoutNeverCreatesASecondJournal(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 1})
	ctx := context.Background()
	acct := rail.Account()
	req := fundingjournal.Request{RequestID: "payout-1", AccountID: acct, Direction: fundingstore.Credit, Amount: 2500}

	f := rail.Sim.Faults()
	f.HangRate = 1
	if err := rail.Sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	w := &fundingjournal.Writer{Store: rail.Store, Broker: rail.Client(300 * time.Millisecond), FirmAccount: rail.Firm}
	if _, err := w.Submit(ctx, req); !errors.Is(err, fundingjournal.ErrUnknownOutcome) {
		t.Fatalf("submit with the answer lost: %v, want ErrUnknownOutcome", err)
	}
	if m, _ := rail.Store.ByKey(ctx, fundingjournal.Key(req)); m.BrokerID != "" {
		t.Fatalf("intent bound to %q without an answer", m.BrokerID)
	}
	// A timeout on the retry too: still one journal.
	if _, err := w.Submit(ctx, req); !errors.Is(err, fundingjournal.ErrUnknownOutcome) {
		t.Fatalf("second submit: %v", err)
	}
	f.HangRate = 0
	if err := rail.Sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}

	restarted := &fundingjournal.Writer{Store: rail.Store, Broker: rail.Client(5 * time.Second), FirmAccount: rail.Firm}
	if err := restarted.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := restarted.Submit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	js := journalsOf(t, rail.Client(5*time.Second), acct)
	if len(js) != 1 || js[0].ID != m.BrokerID || m.Status != funding.Pending {
		t.Fatalf("broker journals %+v, movement %+v; want one journal, bound, PENDING (accepted is not settled)", js, m)
	}
	if got := rail.BrokerCash(acct); got != 2500 {
		t.Fatalf("broker cash %d, want 2500", got)
	}
	if s := rail.Sim.Stats(); s.IdempotentReplays != 0 {
		t.Fatalf("%d journal calls replayed by the broker: the retries called instead of looking up first", s.IdempotentReplays)
	}
}

// The broker holds another request under the intent's key (422): the
// writer adopts nothing, sends the intent to review and tries no other key.
func TestAKeyConflictGoesToReviewAndNeverCreatesAJournal(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 2})
	ctx := context.Background()
	acct := rail.Account()
	req := fundingjournal.Request{RequestID: "payout-2", AccountID: acct, Direction: fundingstore.Credit, Amount: 4000}
	c := rail.Client(5 * time.Second)
	if _, err := c.CreateJournal(ctx, fundingbroker.JournalRequest{FromAccount: rail.Firm, ToAccount: acct, Amount: 100, Description: "someone else"},
		fundingjournal.Key(req)); err != nil {
		t.Fatal(err)
	}
	w := &fundingjournal.Writer{Store: rail.Store, Broker: c, FirmAccount: rail.Firm}
	for range 2 {
		if _, err := w.Submit(ctx, req); !errors.Is(err, fundingjournal.ErrKeyConflict) {
			t.Fatalf("submit: %v, want ErrKeyConflict", err)
		}
	}
	if js := journalsOf(t, c, acct); len(js) != 1 || js[0].Description != "someone else" {
		t.Fatalf("broker journals %+v, want only the other request's", js)
	}
	rs, err := rail.Store.Reviews(ctx)
	if err != nil || len(rs) == 0 || rs[0].Reason != fundingstore.ReasonKeyConflict || rs[0].IntentKey != fundingjournal.Key(req) {
		t.Fatalf("reviews %+v, %v", rs, err)
	}
}

// A withdrawal is a journal to the firm, a debit of the customer.
func TestWithdrawalJournalsToTheFirm(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 3})
	ctx := context.Background()
	acct := rail.Account()
	w := &fundingjournal.Writer{Store: rail.Store, Broker: rail.Client(5 * time.Second), FirmAccount: rail.Firm}
	if _, err := w.Submit(ctx, fundingjournal.Request{RequestID: "in", AccountID: acct, Direction: fundingstore.Credit, Amount: 5000}); err != nil {
		t.Fatal(err)
	}
	m, err := w.Submit(ctx, fundingjournal.Request{RequestID: "out", AccountID: acct, Direction: fundingstore.Debit, Amount: 1500})
	if err != nil || m.Direction != fundingstore.Debit || m.BrokerID == "" {
		t.Fatalf("withdrawal %+v, %v", m, err)
	}
	if got := rail.BrokerCash(acct); got != 3500 {
		t.Fatalf("broker cash %d, want 3500", got)
	}
}

// The broker refuses a withdrawal outright (403: the cash is not there)
// and the caller is told so. The cash arrives later: the resume loop must
// not send the refused withdrawal again on its own — the customer was told
// it failed and may well have asked again — so nothing leaves the account.
func TestResumeNeverSendsARefusedIntentAgain(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 5})
	ctx := context.Background()
	acct := rail.Account()
	w := &fundingjournal.Writer{Store: rail.Store, Broker: rail.Client(5 * time.Second), FirmAccount: rail.Firm}
	withdrawal := fundingjournal.Request{RequestID: "withdraw-1", AccountID: acct, Direction: fundingstore.Debit, Amount: 700}
	if _, err := w.Submit(ctx, withdrawal); err == nil || errors.Is(err, fundingjournal.ErrUnknownOutcome) {
		t.Fatalf("withdrawal from an empty account: %v; want the broker's refusal", err)
	}
	if _, err := w.Submit(ctx, fundingjournal.Request{RequestID: "deposit-1", AccountID: acct, Direction: fundingstore.Credit, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	fundingtest.Eventually(t, 30*time.Second, "the deposit reaches the account", func() (bool, string) {
		c := rail.BrokerCash(acct)
		return c == 1000, fmt.Sprintf("cash %d", c)
	})
	if err := w.Resume(ctx); err != nil {
		t.Fatalf("resume: %v", err)
	}
	js, err := rail.Client(5*time.Second).ListJournals(ctx, fundingbroker.JournalFilter{FromAccount: acct})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 0 || rail.BrokerCash(acct) != 1000 {
		t.Fatalf("after resume: %d journals out of the account, cash %d; want none, 1000", len(js), rail.BrokerCash(acct))
	}
	if m, err := rail.Store.ByKey(ctx, fundingjournal.Key(withdrawal)); err != nil || m.BrokerID != "" {
		t.Fatalf("the refused intent: %+v (%v); want it without a broker id", m, err)
	}
}
