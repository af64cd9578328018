package reconcilerfunding_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/services/brokersim"
	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingjournal"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/funding/fundingstream"
	"github.com/concordhq/concord/services/funding/fundingtest"
	"github.com/concordhq/concord/services/funding/fundingtransfer"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/fundingrepair"
	"github.com/concordhq/concord/services/reconciler/reconcilerbroker"
	"github.com/concordhq/concord/services/reconciler/reconcilercli"
	"github.com/concordhq/concord/services/reconciler/reconcilerfunding"
)

const within = 60 * time.Second

// harness is the broker rail with the reconciler beside it: broker-sim in
// process, funding-svc's database, and — once repairs() starts them — the
// relay publishing that database's outbox to Kafka and funding-svc's
// funding-commands consumer on the idempotent runner.
type harness struct {
	t      *testing.T
	rail   *fundingtest.Rail
	store  *reconcilerfunding.Store
	reader *reconcilerbroker.Reader
	events outbox.Writer
	start  time.Time
}

func newHarness(t *testing.T, cfg brokersim.Config) *harness {
	t.Helper()
	rail := fundingtest.New(t, cfg)
	ctx := context.Background()
	if err := reconcilerfunding.Migrate(ctx, rail.Pool); err != nil {
		t.Fatal(err)
	}
	if err := idempotent.Migrate(ctx, rail.Pool); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, rail: rail, events: outbox.Writer{TopicPrefix: testkit.UniqueName(t, "heal") + "."}, start: time.Now().Add(-time.Second)}
	rail.Store.Outbox = h.events
	h.store = reconcilerfunding.New(rail.Pool)
	h.store.Outbox = h.events
	h.reader = &reconcilerbroker.Reader{Client: rail.Client(5 * time.Second), Streams: rail.Client(0), Firm: rail.Firm}
	return h
}

func (h *harness) reconciler(window time.Duration) *reconciler.BrokerReconciler {
	h.t.Helper()
	r, err := reconciler.NewBrokerReconciler(reconciler.BrokerConfig{Store: h.store, Broker: h.reader, ExecutedWindow: window, Workers: 4})
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// repairs starts the relay and funding-svc's command consumer on real
// Kafka until the test ends.
func (h *harness) repairs() {
	t := h.t
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	kafka := testkit.NewKafka(t)
	adm := kafka.Admin(t)
	topics := []string{h.events.TopicPrefix + fundingrepair.Topic, h.events.TopicPrefix + "account-events"}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topics...) })
	for _, topic := range topics {
		if _, err := adm.CreateTopic(ctx, 2, -1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Fatalf("create topic %s: %v", topic, err)
		}
	}
	relay, err := publisher.New(publisher.Config{Pool: h.rail.Pool, Kafka: kafka.Config(), Shards: 2, Workers: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var mux idempotent.Mux
	fundingrepair.Register(&mux, h.rail.Store)
	runner, err := idempotent.NewRunner(idempotent.Config{Group: testkit.UniqueName(t, "funding-svc"), Topics: []string{topics[0]},
		Pool: h.rail.Pool, Kafka: kafka.Config(), BatchHandler: fundingrepair.BatchHandler(&mux), Types: fundingrepair.Types, Outbox: h.events})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{relay.Run, runner.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// stream runs funding-svc's consumer of kind until stop is called.
func (h *harness) stream(kind fundingstream.Kind) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &fundingstream.Consumer{Kind: kind, Store: h.rail.Store, Broker: h.rail.Client(0), FirmAccount: h.rail.Firm,
		Rewind: time.Minute, Backoff: 10 * time.Millisecond}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = c.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	h.t.Cleanup(stop)
	return stop
}

func (h *harness) count(q string, args ...any) int { return h.rail.Count(q, args...) }

func (h *harness) commands() int {
	return h.count(`select count(*) from outbox where event_type = 'funding.apply_broker_status'`)
}

// converged waits until every account's projected balance is its cash at
// the broker and every finding with a command is resolved.
func (h *harness) converged(accounts ...string) {
	h.t.Helper()
	fundingtest.Eventually(h.t, within, "the mirror converges on the broker", func() (bool, string) {
		for _, a := range accounts {
			if got, cash := h.rail.Balance(a), h.rail.BrokerCash(a); got != cash {
				return false, fmt.Sprintf("account %s: projected %d, broker %d", a, got, cash)
			}
		}
		open := h.count(`select count(*) from reconciliation_findings where repair_command is not null and resolved_at is null`)
		return open == 0, fmt.Sprintf("%d repair findings still open", open)
	})
}

func (h *harness) heal(r *reconciler.BrokerReconciler) reconciler.BrokerHealReport {
	h.t.Helper()
	rep, err := r.Heal(context.Background(), h.start, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

func (h *harness) deposit(w *fundingjournal.Writer, account string, i int, cents int64) fundingstore.Movement {
	h.t.Helper()
	m, err := w.Submit(context.Background(), fundingjournal.Request{RequestID: fmt.Sprintf("dep-%d", i), AccountID: account,
		Direction: fundingstore.Credit, Amount: cents})
	if err != nil {
		h.t.Fatal(err)
	}
	return m
}

func (h *harness) setFaults(change func(*brokersim.Faults)) {
	h.t.Helper()
	f := h.rail.Sim.Faults()
	change(&f)
	if err := h.rail.Sim.SetFaults(f); err != nil {
		h.t.Fatal(err)
	}
}

// Every status message the journal stream sends is dropped: the journals
// executed at the broker stay pending in the mirror and nothing is
// credited. A heal of the window finds each, funding-svc applies the
// repairs through its writer, and every balance equals the broker's. The
// same window healed again records nothing and emits nothing.
func TestHealRecoversDroppedStreamMessagesAndARerunIsANoOp(t *testing.T) {
	h := newHarness(t, brokersim.Config{Seed: 61})
	h.setFaults(func(f *brokersim.Faults) { f.SSEDropRate = 1 })
	h.stream(fundingstream.Journals)
	w := &fundingjournal.Writer{Store: h.rail.Store, Broker: h.rail.Client(5 * time.Second), FirmAccount: h.rail.Firm}
	accounts := []string{h.rail.Account(), h.rail.Account()}
	for i, a := range accounts {
		h.deposit(w, a, i, int64(1000+i))
		h.deposit(w, a, 10+i, 500)
	}
	fundingtest.Eventually(t, within, "the stream drops messages", func() (bool, string) {
		s := h.rail.Sim.Stats()
		return s.SSEDropped >= 4, fmt.Sprintf("%d dropped", s.SSEDropped)
	})
	if n := h.count(`select count(*) from funding_entries`); n != 0 {
		t.Fatalf("%d entries before the heal; the dropped messages were delivered", n)
	}
	r := h.reconciler(time.Hour)
	rep := h.heal(r)
	if rep.Counts[reconciler.Repairable] != 4 || rep.FindingsOpened != 4 || rep.CommandsEmitted != 4 {
		t.Fatalf("heal: %+v; want 4 repairable findings and commands", rep)
	}
	// Before funding-svc applied anything: the findings are open, so the
	// same drift is neither recorded nor commanded twice.
	if again := h.heal(r); again.Counts[reconciler.Repairable] != 4 || again.FindingsOpened != 0 || again.CommandsEmitted != 0 {
		t.Fatalf("heal re-run with the repairs pending: %+v; want the 4 drifts seen, nothing recorded", again)
	}
	h.repairs()
	h.converged(accounts...)
	if n := h.count(`select count(*) from outbox where event_type = 'account.credited'`); n != 4 {
		t.Fatalf("%d account.credited events, want 4", n)
	}
	again := h.heal(r)
	if again.FindingsOpened != 0 || again.CommandsEmitted != 0 || again.Counts[reconciler.InSync] != 4 {
		t.Fatalf("heal re-run: %+v; want 4 in sync, no finding, no command", again)
	}
	if n := h.commands(); n != 4 {
		t.Fatalf("%d commands after the re-run, want 4", n)
	}
}

// An ACH deposit completes and is credited; the bank returns it while the
// funding stream is down. The scan finds the completed transfer RETURNED
// inside the executed window and the credit is reversed, once. With a
// window the record has outlived, the scan does not look at it. (Seed
// 002's anti-pattern "executed treated as final": without the window the
// first scan sees nothing.)
func TestReturnedAfterCompleteIsReversedOnceInsideTheExecutedWindow(t *testing.T) {
	h := newHarness(t, brokersim.Config{Seed: 62})
	stop := h.stream(fundingstream.Funding)
	acct := h.rail.Account()
	tw := &fundingtransfer.Writer{Store: h.rail.Store, Broker: h.rail.Client(5 * time.Second)}
	m, err := tw.Submit(context.Background(), fundingtransfer.Request{RequestID: "ach-1", AccountID: acct, RelationshipID: "rel-1",
		Direction: fundingstore.Credit, Amount: 7500})
	if err != nil {
		t.Fatal(err)
	}
	fundingtest.Eventually(t, within, "the deposit is credited", func() (bool, string) {
		b := h.rail.Balance(acct)
		return b == 7500, fmt.Sprintf("balance %d", b)
	})
	stop()
	if err := h.rail.Sim.ReturnTransfer(context.Background(), m.BrokerID, "R01"); err != nil {
		t.Fatal(err)
	}

	outside := h.reconciler(time.Nanosecond)
	rep, err := outside.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Settled != 1 || rep.Calls != 0 || rep.FindingsOpened != 0 {
		t.Fatalf("scan with the record outside the window: %+v; want it settled, no call, no finding", rep)
	}

	h.repairs()
	inside := h.reconciler(time.Hour)
	for cycle := 1; cycle <= 2; cycle++ {
		rep, err := inside.RunCycle(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if cycle == 1 && (rep.ByKind[reconciler.KindMissedReversal] != 1 || rep.CommandsEmitted != 1) {
			t.Fatalf("scan inside the window: %+v; want one missed_reversal and its command", rep)
		}
		if cycle == 1 {
			h.converged(acct)
		}
		if cycle == 2 && (rep.FindingsOpened != 0 || rep.CommandsEmitted != 0) {
			t.Fatalf("second scan: %+v; want nothing new", rep)
		}
	}
	if got := h.rail.Balance(acct); got != 0 || h.rail.BrokerCash(acct) != 0 {
		t.Fatalf("balance %d, broker %d; want both 0 after the return", got, h.rail.BrokerCash(acct))
	}
	if n := h.count(`select count(*) from outbox where event_type = 'account.credit_reversed'`); n != 1 {
		t.Fatalf("%d account.credit_reversed events, want 1", n)
	}
	if n := h.commands(); n != 1 {
		t.Fatalf("%d commands, want 1", n)
	}
}

// A journal credited through the stream is corrected at the broker while
// funding-svc is away: the original goes to correct (its cash back) and a
// replacement the mirror never saw is executed. Heal finds both: the
// original's credit is reversed and the replacement mirrored and credited
// under its own id.
func TestHealFindsACorrectedJournal(t *testing.T) {
	h := newHarness(t, brokersim.Config{Seed: 63})
	stop := h.stream(fundingstream.Journals)
	w := &fundingjournal.Writer{Store: h.rail.Store, Broker: h.rail.Client(5 * time.Second), FirmAccount: h.rail.Firm}
	acct := h.rail.Account()
	m := h.deposit(w, acct, 1, 2500)
	fundingtest.Eventually(t, within, "the deposit is credited", func() (bool, string) {
		b := h.rail.Balance(acct)
		return b == 2500, fmt.Sprintf("balance %d", b)
	})
	stop()
	replacement, err := h.rail.Sim.CorrectJournal(context.Background(), m.BrokerID, "24.99")
	if err != nil {
		t.Fatal(err)
	}
	h.repairs()
	rep := h.heal(h.reconciler(time.Hour))
	if rep.ByKind[reconciler.KindMissedReversal] != 1 || rep.ByKind[reconciler.KindMissingLocally] != 1 || rep.CommandsEmitted != 2 {
		t.Fatalf("heal: %+v; want the original's missed_reversal and the replacement missing_locally", rep)
	}
	h.converged(acct)
	if got := h.rail.Balance(acct); got != 2499 {
		t.Fatalf("balance %d, want 2499", got)
	}
	if _, err := h.rail.Store.ByBrokerID(context.Background(), funding.Journal, replacement); err != nil {
		t.Fatalf("the replacement %s is not mirrored: %v", replacement, err)
	}
	if n := h.count(`select count(*) from outbox where event_type = 'account.credit_reversed'`); n != 1 {
		t.Fatalf("%d account.credit_reversed events, want 1", n)
	}
}

// relabel is the broker as it is, except that it reports one record's
// status in a spelling no map knows.
type relabel struct {
	*reconcilerbroker.Reader
	id, status string
}

func (r relabel) Journal(ctx context.Context, id string) (reconciler.BrokerRecord, error) {
	rec, err := r.Reader.Journal(ctx, id)
	if id == r.id {
		rec.Status = r.status
	}
	return rec, err
}

// A status this version does not know goes to review: a needs_review
// finding, no command, the movement and the balance untouched.
func TestAnUnknownBrokerStatusGoesToReview(t *testing.T) {
	h := newHarness(t, brokersim.Config{Seed: 64})
	h.setFaults(func(f *brokersim.Faults) { f.SSEDropRate = 1 })
	w := &fundingjournal.Writer{Store: h.rail.Store, Broker: h.rail.Client(5 * time.Second), FirmAccount: h.rail.Firm}
	acct := h.rail.Account()
	m := h.deposit(w, acct, 1, 900)
	r, err := reconciler.NewBrokerReconciler(reconciler.BrokerConfig{Store: h.store, Broker: relabel{h.reader, m.BrokerID, "clawed_back"},
		ExecutedWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.RunCycle(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Counts[reconciler.NeedsReview] != 1 || rep.ByKind[reconciler.KindUnknownExternalStatus] != 1 || rep.CommandsEmitted != 0 {
		t.Fatalf("scan: %+v; want one unknown_external_status review and no command", rep)
	}
	got, err := h.rail.Store.ByBrokerID(context.Background(), funding.Journal, m.BrokerID)
	if err != nil || got.Status != funding.Pending || h.rail.Balance(acct) != 0 || h.commands() != 0 {
		t.Fatalf("movement %+v (%v), balance %d, %d commands; want it pending, nothing applied", got, err, h.rail.Balance(acct), h.commands())
	}

	// The review workflow: the finding is listed, and a person closes it.
	db := h.rail.Pool.Config().ConnString()
	var out bytes.Buffer
	if err := reconcilercli.Run(context.Background(), []string{"broker", "findings", "--funding-database-url", db}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), m.BrokerID) || !strings.Contains(out.String(), string(reconciler.KindUnknownExternalStatus)) {
		t.Fatalf("broker findings:\n%s\nwant the %s finding of %s", out.String(), reconciler.KindUnknownExternalStatus, m.BrokerID)
	}
	fs, err := h.store.Findings(context.Background(), false, 10)
	if err != nil || len(fs) != 1 {
		t.Fatalf("open findings %+v (%v), want 1", fs, err)
	}
	if err := reconcilercli.Run(context.Background(), []string{"broker", "resolve", strconv.FormatInt(fs[0].ID, 10), "--note", "asked the broker",
		"--funding-database-url", db}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if fs, err := h.store.Findings(context.Background(), false, 10); err != nil || len(fs) != 0 {
		t.Fatalf("open findings after resolve: %+v (%v), want none", fs, err)
	}
}

// The broker allows 6 calls a second and the heal needs about 20 with 4
// workers and no pacing of its own: every 429 is waited out until the
// X-RateLimit-Reset it names, so the heal succeeds and meets at most one
// 429 per worker per window.
func TestHealWaitsOutTheRateLimitUntilReset(t *testing.T) {
	h := newHarness(t, brokersim.Config{Seed: 65, RateLimit: 6, RateWindow: time.Second})
	var accounts []string
	for range 8 {
		var id string
		testkit.Eventually(t, within, "an account is opened under the rate limit", func() error {
			req, _ := http.NewRequest(http.MethodPost, h.rail.HTTP.URL+"/v1/accounts", nil)
			req.SetBasicAuth("CK_TEST", "secret")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", res.StatusCode)
			}
			var a struct {
				ID string `json:"id"`
			}
			if err := json.NewDecoder(res.Body).Decode(&a); err != nil {
				return err
			}
			id = a.ID
			return nil
		})
		accounts = append(accounts, id)
		// Known to the mirror, so the heal lists its transfers.
		if _, err := h.rail.Pool.Exec(context.Background(), `insert into funding_movements (domain, broker_id, account_id, direction, amount, currency, status)
			values ('journal', $1, $2, 'credit', 100, 'USD', 'PENDING')`, "seed-"+id, id); err != nil {
			t.Fatal(err)
		}
	}
	before := h.rail.Sim.Stats().RateLimited
	began := time.Now()
	rep, err := h.reconciler(time.Hour).Heal(context.Background(), h.start, time.Now())
	if err != nil {
		t.Fatalf("heal under the rate limit: %v (%+v)", err, rep)
	}
	elapsed := time.Since(began)
	refused := h.rail.Sim.Stats().RateLimited - before
	windows := int64(elapsed/time.Second) + 2
	t.Logf("heal under 6 calls/s: %d calls, %d answered 429 (broker counted %d), %s", rep.Calls, rep.RateLimited, refused, elapsed.Round(time.Millisecond))
	if rep.RateLimited == 0 || refused == 0 {
		t.Fatalf("the heal never met the limit (%d calls in %s); the test proves nothing", rep.Calls, elapsed)
	}
	if refused > 4*windows {
		t.Fatalf("%d calls refused with 429 in %s (%d windows); want at most one per worker per window", refused, elapsed, windows)
	}
	if rep.Calls < 2*len(accounts) {
		t.Fatalf("%d calls; want the transfers and wallet transfers of %d accounts listed", rep.Calls, len(accounts))
	}
}

// Funding-wallet transfers send no events at all: money arriving in an
// account's wallet that funding-svc never created is invisible to its
// streams. Heal lists the account's wallet transfers, mirrors the one the
// broker completed under its id, and the credit matches the broker's
// cash.
func TestHealMirrorsAnEventlessWalletTransfer(t *testing.T) {
	h := newHarness(t, brokersim.Config{Seed: 66})
	acct := h.rail.Account()
	// Known to the mirror through an earlier, settled movement.
	if _, err := h.rail.Pool.Exec(context.Background(), `insert into funding_movements (domain, broker_id, account_id, direction, amount, currency, status, updated_at)
		values ('journal', 'old', $1, 'credit', 100, 'USD', 'CANCELLED', now() - interval '30 days')`, acct); err != nil {
		t.Fatal(err)
	}
	var w struct {
		ID string `json:"id"`
	}
	h.rail.Call(http.MethodPost, "/v1beta/demo/banking/funding", map[string]string{"account_id": acct, "amount": "42.00"}, &w)
	fundingtest.Eventually(t, within, "the wallet transfer completes at the broker", func() (bool, string) {
		c := h.rail.BrokerCash(acct)
		return c == 4200, fmt.Sprintf("broker cash %d", c)
	})
	h.repairs()
	rep := h.heal(h.reconciler(time.Hour))
	if rep.WalletTransfers != 1 || rep.ByKind[reconciler.KindMissingLocally] != 1 || rep.CommandsEmitted != 1 {
		t.Fatalf("heal: %+v; want the wallet transfer found missing locally and one command", rep)
	}
	h.converged(acct)
	m, err := h.rail.Store.ByBrokerID(context.Background(), funding.WalletTransfer, w.ID)
	if err != nil || m.Status != funding.Completed || m.Amount != 4200 {
		t.Fatalf("wallet transfer %s mirrored as %+v (%v); want completed, 4200", w.ID, m, err)
	}
}

// A transfer's answer is lost; its stream message mirrors the transfer
// under its broker id before the intent knows it, and the scan records a
// finding on that row. When the intent is finally answered, funding-svc
// folds the mirrored row into the intent's and removes it: the finding
// must neither stop the fold (the intent would never learn its broker id)
// nor be lost with the row.
func TestAnIntentAnsweredLateFoldsAMirroredRowThatHasAFinding(t *testing.T) {
	h := newHarness(t, brokersim.Config{Seed: 66})
	ctx := context.Background()
	acct := h.rail.Account()
	intent, _, err := h.rail.Store.Intend(ctx, fundingstore.Movement{Domain: funding.Transfer, IntentKey: "late-answer-1",
		AccountID: acct, Direction: fundingstore.Credit, Amount: 700, Currency: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	const brokerID = "tr-late-answer-1"
	if _, err := h.rail.Store.Report(ctx, fundingstore.News{Domain: funding.Transfer, BrokerID: brokerID, BrokerStatus: "QUEUED",
		Details: &fundingstore.Movement{AccountID: acct, Direction: fundingstore.Credit, Amount: 700, Currency: "USD"}}); err != nil {
		t.Fatal(err)
	}
	rows, _, err := h.store.MovementsByBrokerID(ctx, []reconciler.BrokerRef{{Domain: funding.Transfer, BrokerID: brokerID}})
	if err != nil || len(rows) != 1 {
		t.Fatalf("mirrored row: %v, %v", rows, err)
	}
	stats, err := h.store.RecordMovementFindings(ctx, reconciler.SourceScan, []reconciler.MovementResult{{Movement: rows[0], Known: true,
		Broker:   reconciler.BrokerRecord{Domain: funding.Transfer, BrokerID: brokerID, AccountID: acct, Status: "QUEUED"},
		Decision: reconciler.Decision{Verdict: reconciler.NeedsReview, Kind: reconciler.KindCompletedLocallyNotAtBroker, Verified: true}}})
	if err != nil || stats.FindingsOpened != 1 {
		t.Fatalf("finding on the mirrored row: %+v, %v", stats, err)
	}
	m, err := h.rail.Store.Accepted(ctx, intent.IntentKey, brokerID)
	if err != nil {
		t.Fatalf("the late answer of intent %s: %v", intent.IntentKey, err)
	}
	if m.ID != intent.ID || m.BrokerID != brokerID {
		t.Fatalf("after the fold: %+v; want intent row %d holding %s", m, intent.ID, brokerID)
	}
	if n := h.count(`select count(*) from reconciliation_findings where broker_id = $1 and resolved_at is null
		and (movement_id = $2 or movement_id is null)`, brokerID, intent.ID); n != 1 {
		t.Fatalf("%d open findings of %s on the intent's row, want the mirrored row's 1", n, brokerID)
	}
	// Seen in sync on the intent's row, the record's finding is cleared.
	rows, _, err = h.store.MovementsByBrokerID(ctx, []reconciler.BrokerRef{{Domain: funding.Transfer, BrokerID: brokerID}})
	if err != nil || len(rows) != 1 {
		t.Fatalf("folded row: %v, %v", rows, err)
	}
	stats, err = h.store.RecordMovementFindings(ctx, reconciler.SourceScan, []reconciler.MovementResult{{Movement: rows[0], Known: true,
		Broker:   reconciler.BrokerRecord{Domain: funding.Transfer, BrokerID: brokerID, AccountID: acct, Status: "QUEUED"},
		Decision: reconciler.Decision{Verdict: reconciler.InSync, Verified: true}}})
	if err != nil || stats.FindingsCleared != 1 {
		t.Fatalf("in sync after the fold: %+v, %v; want the finding cleared", stats, err)
	}
}

// `reconciler broker run` exports the rail's lag and open findings, as
// `reconciler run` does the payments': a journal the mirror holds pending
// while the broker executed it is a repairable finding left open (no
// funding-svc applies it here), and the gauges say so.
func TestBrokerRunExportsTheRailsLagAndOpenFindings(t *testing.T) {
	h := newHarness(t, brokersim.Config{Seed: 67})
	w := &fundingjournal.Writer{Store: h.rail.Store, Broker: h.rail.Client(5 * time.Second), FirmAccount: h.rail.Firm}
	h.deposit(w, h.rail.Account(), 1, 1200)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- reconcilercli.Run(ctx, []string{"broker", "run", "--funding-database-url", h.rail.Pool.Config().ConnString(),
			"--broker-url", h.rail.HTTP.URL, "--broker-key-id", "CK_TEST", "--broker-secret", "secret", "--firm-account", h.rail.Firm,
			"--topic-prefix", h.events.TopicPrefix, "--grace", "0s", "--interval", "100ms", "--heal-every", "0s", "--http-addr", addr}, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("broker run: %v", err)
		}
	})
	fundingtest.Eventually(t, within, "broker run exports the open finding and the lag", func() (bool, string) {
		m, err := testkit.ScrapeErr("http://" + addr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		open := m.Value("concord_reconciler_open_findings", map[string]string{"kind": string(reconciler.KindMissedCompletion)})
		repairable := m.Value("concord_reconciler_open_findings_by_verdict", map[string]string{"verdict": string(reconciler.Repairable)})
		lag := m.Value("concord_reconciler_lag_seconds", nil)
		return open == 1 && repairable == 1 && lag > 0,
			fmt.Sprintf("open missed_completion %v, repairable %v, lag %vs", open, repairable, lag)
	})
}
