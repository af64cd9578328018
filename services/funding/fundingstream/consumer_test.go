package fundingstream_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/services/brokersim"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingjournal"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/funding/fundingstream"
	"github.com/concordhq/concord/services/funding/fundingtest"
)

const within = 20 * time.Second

// run starts a consumer of kind on rail until the test ends or stop is
// called; stop waits for it to return.
func run(t *testing.T, rail *fundingtest.Rail, kind fundingstream.Kind, rewind time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &fundingstream.Consumer{Kind: kind, Store: rail.Store, Broker: rail.Client(0), FirmAccount: rail.Firm,
		Rewind: rewind, Backoff: 10 * time.Millisecond}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = c.Run(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

func events(rail *fundingtest.Rail, typ string) int {
	return rail.Count(`select count(*) from outbox where event_type = $1`, typ)
}

func setFaults(t *testing.T, rail *fundingtest.Rail, change func(*brokersim.Faults)) {
	t.Helper()
	f := rail.Sim.Faults()
	change(&f)
	if err := rail.Sim.SetFaults(f); err != nil {
		t.Fatal(err)
	}
}

// converged waits until every account's projected balance is its cash at
// the broker and the outbox holds want events of typ.
func converged(t *testing.T, rail *fundingtest.Rail, accounts []string, typ string, want int) {
	t.Helper()
	fundingtest.Eventually(t, within, "projection converges on the broker", func() (bool, string) {
		for _, a := range accounts {
			if got, cash := rail.Balance(a), rail.BrokerCash(a); got != cash {
				return false, fmt.Sprintf("account %s: projected %d, broker %d", a, got, cash)
			}
		}
		n := events(rail, typ)
		return n == want, fmt.Sprintf("%d %s events, want %d", n, typ, want)
	})
}

func deposit(t *testing.T, rail *fundingtest.Rail, w *fundingjournal.Writer, account string, i int, cents int64) {
	t.Helper()
	if _, err := w.Submit(context.Background(), fundingjournal.Request{RequestID: fmt.Sprintf("dep-%d", i), AccountID: account,
		Direction: fundingstore.Credit, Amount: cents}); err != nil {
		t.Fatal(err)
	}
}

// The journal stream sends messages twice, out of order across accounts
// and disconnects often: every journal is applied once and the projection
// equals the broker's cash.
func TestDuplicatedReorderedAndDisconnectedDeliveriesApplyOnce(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 11})
	setFaults(t, rail, func(f *brokersim.Faults) {
		f.SSEDuplicateRate, f.SSEReorderRate, f.SSEDisconnectRate = 0.4, 0.4, 0.15
	})
	w := &fundingjournal.Writer{Store: rail.Store, Broker: rail.Client(5 * time.Second), FirmAccount: rail.Firm}
	accounts := []string{rail.Account(), rail.Account(), rail.Account()}
	run(t, rail, fundingstream.Journals, time.Minute)
	n := 0
	for i := range 8 {
		for _, a := range accounts {
			deposit(t, rail, w, a, i, int64(100+i))
			n++
		}
	}
	converged(t, rail, accounts, "account.credited", n)
	if s := rail.Sim.Stats(); s.SSEDuplicated == 0 || s.SSEReordered == 0 || s.SSEDisconnects == 0 {
		t.Fatalf("faults did not happen: %+v", s)
	}
}

// A corrected journal: the original's credit is taken back with a new
// event and the replacement, a journal the service never asked for, is
// credited under its own id.
func TestACorrectedJournalRevertsAndCreditsTheReplacement(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 12})
	w := &fundingjournal.Writer{Store: rail.Store, Broker: rail.Client(5 * time.Second), FirmAccount: rail.Firm}
	acct := rail.Account()
	run(t, rail, fundingstream.Journals, time.Minute)
	m, err := w.Submit(context.Background(), fundingjournal.Request{RequestID: "dep", AccountID: acct, Direction: fundingstore.Credit, Amount: 2500})
	if err != nil {
		t.Fatal(err)
	}
	converged(t, rail, []string{acct}, "account.credited", 1)
	replacement, err := rail.Sim.CorrectJournal(context.Background(), m.BrokerID, "24.99")
	if err != nil {
		t.Fatal(err)
	}
	converged(t, rail, []string{acct}, "account.credited", 2)
	if got := events(rail, "account.credit_reversed"); got != 1 {
		t.Fatalf("%d credit_reversed events, want 1", got)
	}
	if got := rail.Balance(acct); got != 2499 {
		t.Fatalf("balance %d, want 2499", got)
	}
	r, err := rail.Store.ByBrokerID(context.Background(), "journal", replacement)
	if err != nil || r.Amount != 2499 || r.IntentKey != "" {
		t.Fatalf("replacement %+v, %v", r, err)
	}
}

// An ACH deposit completes, then the bank returns it: the credit is taken
// back by a new event, never by editing the first.
func TestAReturnAfterCompleteReversesTheCredit(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 13})
	acct := rail.Account()
	run(t, rail, fundingstream.Funding, time.Minute)
	var tr fundingbroker.Transfer
	rail.Call(http.MethodPost, "/v1/accounts/"+acct+"/transfers", map[string]string{"transfer_type": "ach", "relationship_id": "rel-1",
		"amount": "100.00", "direction": "INCOMING"}, &tr)
	converged(t, rail, []string{acct}, "account.credited", 1)
	if got := rail.Balance(acct); got != 10000 {
		t.Fatalf("balance %d after COMPLETE, want 10000", got)
	}
	if err := rail.Sim.ReturnTransfer(context.Background(), tr.ID, ""); err != nil {
		t.Fatal(err)
	}
	fundingtest.Eventually(t, within, "the return is reversed", func() (bool, string) {
		n := events(rail, "account.credit_reversed")
		return n == 1 && rail.Balance(acct) == 0, fmt.Sprintf("%d reversals, balance %d", n, rail.Balance(acct))
	})
	if got := events(rail, "account.credited"); got != 1 {
		t.Fatalf("%d credits, want the first one kept", got)
	}
}

// The consumer is stopped mid-stream while journals keep executing; a new
// instance resumes from the persisted cursor and misses nothing (reading
// from "now" would lose everything sent while it was down).
func TestANewInstanceResumesFromTheCursorAndMissesNothing(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 14})
	w := &fundingjournal.Writer{Store: rail.Store, Broker: rail.Client(5 * time.Second), FirmAccount: rail.Firm}
	accounts := []string{rail.Account(), rail.Account()}
	stop := run(t, rail, fundingstream.Journals, time.Minute)
	for i := range 5 {
		deposit(t, rail, w, accounts[i%2], i, 100)
	}
	stop() // wherever it was
	taken := events(rail, "account.credited")
	for i := 5; i < 12; i++ {
		deposit(t, rail, w, accounts[i%2], i, 100)
	}
	if got := events(rail, "account.credited"); got != taken {
		t.Fatalf("stopped consumer still applying: %d → %d", taken, got)
	}
	run(t, rail, fundingstream.Journals, time.Minute)
	converged(t, rail, accounts, "account.credited", 12)
}

// A status no map knows goes to review once, however often the message
// is delivered, and the stream goes on.
func TestAnUnknownStatusGoesToReviewOnceAndTheStreamGoesOn(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 15})
	ctx := context.Background()
	if _, _, err := rail.Store.Intend(ctx, fundingstore.Movement{Domain: "journal", IntentKey: "k1", AccountID: "acct-1",
		Direction: fundingstore.Credit, Amount: 500, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	msgs := []string{
		`{"event_id":"01KB0000000000000000000001","journal_id":"j-1","status_from":"","status_to":"frozen_by_compliance","idempotency_key":"k1"}`,
		`{"event_id":"01KB0000000000000000000001","journal_id":"j-1","status_from":"","status_to":"frozen_by_compliance","idempotency_key":"k1"}`,
		`{"event_id":"01KB0000000000000000000002","journal_id":"j-1","status_from":"queued","status_to":"executed","idempotency_key":"k1"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, m := range msgs {
			fmt.Fprintf(w, ":heartbeat\n\ndata: %s\n\n", m)
		}
	}))
	defer srv.Close()
	c := &fundingstream.Consumer{Kind: fundingstream.Journals, Store: rail.Store, Broker: &fundingbroker.Client{BaseURL: srv.URL, HTTP: srv.Client()}}
	if err := c.Once(ctx); err != nil {
		t.Fatal(err)
	}
	rs, err := rail.Store.Reviews(ctx)
	if err != nil || len(rs) != 1 || rs[0].BrokerStatus != "frozen_by_compliance" {
		t.Fatalf("reviews %+v, %v; want the unknown status once", rs, err)
	}
	if got := rail.Balance("acct-1"); got != 500 {
		t.Fatalf("balance %d, want 500: the stream stopped at the unknown status", got)
	}
	if cur, _ := rail.Store.Cursor(ctx, "journals"); cur != "01KB0000000000000000000002" {
		t.Fatalf("cursor %q", cur)
	}
}

func TestSinceStartsAtTheOriginAndRewindsByTheULIDsTime(t *testing.T) {
	if got := fundingstream.Since("", time.Minute); got != fundingstream.Origin {
		t.Fatalf("a stream never read starts at %q, want the origin", got)
	}
	// 01KB... is a time in 2025; a minute earlier is 60000ms less.
	cur := "01KB2ZZZZZ7QH3M0B1ZQ2S3T4V"
	got := fundingstream.Since(cur, time.Minute)
	if got >= cur || len(got) != 26 || got[10:] != "0000000000000000" {
		t.Fatalf("since %q for cursor %q", got, cur)
	}
	if fundingstream.Since(cur, 0) != cur {
		t.Fatal("no rewind should reconnect at the cursor")
	}
}

// A journal that carries the key of an intent already bound to another
// journal (a correction's replacement copying what the original carried)
// is its own record, read from the broker, not news of the intent.
func TestAJournalCarryingAnotherJournalsKeyIsItsOwnRecord(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 16})
	ctx := context.Background()
	if _, _, err := rail.Store.Intend(ctx, fundingstore.Movement{Domain: "journal", IntentKey: "k1", AccountID: "acct-1",
		Direction: fundingstore.Credit, Amount: 500, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/events/journals/status", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, m := range []string{
			`{"event_id":"01KB0000000000000000000001","journal_id":"j-1","status_to":"executed","idempotency_key":"k1"}`,
			`{"event_id":"01KB0000000000000000000002","journal_id":"j-1","status_to":"correct","idempotency_key":"k1"}`,
			`{"event_id":"01KB0000000000000000000003","journal_id":"j-2","status_to":"executed","idempotency_key":"k1"}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", m)
		}
	})
	mux.HandleFunc("GET /v1/journals/j-2", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":"j-2","entry_type":"JNLC","from_account":"firm","to_account":"acct-1","status":"executed","net_amount":"4.99","description":"k1","currency":"USD"}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &fundingstream.Consumer{Kind: fundingstream.Journals, Store: rail.Store, FirmAccount: "firm",
		Broker: &fundingbroker.Client{BaseURL: srv.URL, HTTP: srv.Client()}}
	if err := c.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if rs, _ := rail.Store.Reviews(ctx); len(rs) != 0 {
		t.Fatalf("reviews %+v", rs)
	}
	if got := rail.Balance("acct-1"); got != 499 {
		t.Fatalf("balance %d, want 499 (500 credited, reverted, 499 credited)", got)
	}
}

// The activities stream alone — duplicated, reordered, disconnecting —
// brings every journal, correction, transfer and return: the status
// streams are not the only source, and activities dedupe on ref_id.
func TestTheActivitiesStreamAloneBringsJournalsCorrectionsAndReturns(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 17})
	setFaults(t, rail, func(f *brokersim.Faults) {
		f.SSEDuplicateRate, f.SSEReorderRate, f.SSEDisconnectRate = 0.3, 0.3, 0.1
	})
	w := &fundingjournal.Writer{Store: rail.Store, Broker: rail.Client(5 * time.Second), FirmAccount: rail.Firm}
	a, b := rail.Account(), rail.Account()
	run(t, rail, fundingstream.Activities, time.Minute)
	m, err := w.Submit(context.Background(), fundingjournal.Request{RequestID: "dep", AccountID: a, Direction: fundingstore.Credit, Amount: 2500})
	if err != nil {
		t.Fatal(err)
	}
	var tr fundingbroker.Transfer
	rail.Call(http.MethodPost, "/v1/accounts/"+b+"/transfers", map[string]string{"transfer_type": "ach", "relationship_id": "rel-1",
		"amount": "100.00", "direction": "INCOMING"}, &tr)
	converged(t, rail, []string{a, b}, "account.credited", 2)
	if _, err := rail.Sim.CorrectJournal(context.Background(), m.BrokerID, "24.99"); err != nil {
		t.Fatal(err)
	}
	if err := rail.Sim.ReturnTransfer(context.Background(), tr.ID, ""); err != nil {
		t.Fatal(err)
	}
	converged(t, rail, []string{a, b}, "account.credited", 3)
	if got := events(rail, "account.credit_reversed"); got != 2 {
		t.Fatalf("%d credit_reversed events, want 2 (the correction, the return)", got)
	}
	if got := rail.Balance(a) + rail.Balance(b); got != 2499 {
		t.Fatalf("balances sum to %d, want 2499", got)
	}
}

// An activity delivered again under another event_id is the same
// activity: the activities stream dedupes on ref_id.
func TestActivitiesDedupeOnRefIDNotEventID(t *testing.T) {
	rail := fundingtest.New(t, brokersim.Config{Seed: 18})
	ctx := context.Background()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2beta1/events/activities", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, id := range []string{"01KB0000000000000000000001", "01KB0000000000000000000002"} {
			fmt.Fprintf(w, `data: {"event_id":%q,"ref_id":"ref-1","account_id":"acct-9","activity_type":"CSD","status":"executed","net_amount":"5.00","details":{"transfer_id":"t-gone"}}`+"\n\n", id)
		}
	})
	mux.HandleFunc("GET /v1/accounts/acct-9/transfers", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `[]`) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &fundingstream.Consumer{Kind: fundingstream.Activities, Store: rail.Store, Broker: &fundingbroker.Client{BaseURL: srv.URL, HTTP: srv.Client()}}
	if err := c.Once(ctx); err != nil {
		t.Fatal(err)
	}
	if rs, _ := rail.Store.Reviews(ctx); len(rs) != 1 || rs[0].BrokerID != "t-gone" {
		t.Fatalf("reviews %+v: want the transfer nobody can place once", rs)
	}
	if cur, _ := rail.Store.Cursor(ctx, "activities"); cur != "01KB0000000000000000000002" {
		t.Fatalf("cursor %q", cur)
	}
}
