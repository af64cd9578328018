package fundingstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingstore"
)

func newStore(t *testing.T) (*fundingstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := testkit.NewPool(t, outbox.Migrate, fundingstore.Migrate)
	return &fundingstore.Store{Pool: pool}, pool
}

// outboxRows lists the outbox's events as "type key", oldest first.
func outboxRows(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `select event_type || ' ' || partition_key || ' ' || topic from outbox order by id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func balance(t *testing.T, s *fundingstore.Store, account string) int64 {
	t.Helper()
	b, err := s.Balance(context.Background(), account, "USD")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func deposit(key, account string, cents int64) fundingstore.Movement {
	return fundingstore.Movement{Domain: funding.Journal, IntentKey: key, AccountID: account, Direction: fundingstore.Credit, Amount: cents, Currency: "USD"}
}

func TestIntendReturnsTheFirstRowAndRefusesAnotherRequestUnderItsKey(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	m, created, err := s.Intend(ctx, deposit("k1", "acct-1", 2500))
	if err != nil || !created || m.Status != "" || m.BrokerID != "" {
		t.Fatalf("first intent: %+v created=%v err=%v", m, created, err)
	}
	again, created, err := s.Intend(ctx, deposit("k1", "acct-1", 2500))
	if err != nil || created || again.ID != m.ID {
		t.Fatalf("same request: %+v created=%v err=%v; want row %d", again, created, err, m.ID)
	}
	if _, _, err := s.Intend(ctx, deposit("k1", "acct-1", 2600)); !errors.Is(err, fundingstore.ErrIntentConflict) {
		t.Fatalf("other amount under the key: %v, want ErrIntentConflict", err)
	}
	if _, _, err := s.Intend(ctx, deposit(strings.Repeat("k", fundingstore.MaxKey+1), "acct-1", 1)); err == nil {
		t.Fatal("a key longer than the broker's limit was accepted")
	}
}

// A journal's news applies its credit once whatever order and however
// often it comes, stores the broker id the first news names, and a later
// correction takes the credit back with a new event.
func TestNewsAppliesOnceOutOfOrderAndACorrectionRevertsWithANewEvent(t *testing.T) {
	s, pool := newStore(t)
	ctx := context.Background()
	if _, _, err := s.Intend(ctx, deposit("k1", "acct-1", 2500)); err != nil {
		t.Fatal(err)
	}
	report := func(status string) fundingstore.Result {
		t.Helper()
		r, err := s.Report(ctx, fundingstore.News{Domain: funding.Journal, BrokerID: "j-1", BrokerStatus: status, IntentKey: "k1", Source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	report("executed")
	report("queued")   // late: would move it backwards
	report("EXECUTED") // duplicate, other case
	report("activity_created")
	if got := balance(t, s, "acct-1"); got != 2500 {
		t.Fatalf("balance %d after the journal executed, want 2500", got)
	}
	m, err := s.ByBrokerID(ctx, funding.Journal, "j-1")
	if err != nil || m.IntentKey != "k1" || m.Status != funding.Completed || m.BrokerStatus != "activity_created" {
		t.Fatalf("movement %+v, %v", m, err)
	}
	if r := report("correct"); r.Effect != funding.Revert {
		t.Fatalf("correction: %+v, want Revert", r)
	}
	report("correct")
	report("executed")
	if got := balance(t, s, "acct-1"); got != 0 {
		t.Fatalf("balance %d after the correction, want 0", got)
	}
	want := []string{"account.credited acct-1 account-events", "account.credit_reversed acct-1 account-events"}
	if got := outboxRows(t, pool); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outbox %q, want %q", got, want)
	}
}

// A transfer RETURNED after COMPLETE reverses its credit; one whose return
// is the first news records both the credit and its reversal. A withdrawal
// debits.
func TestReturnsReverseAndWithdrawalsDebit(t *testing.T) {
	s, pool := newStore(t)
	ctx := context.Background()
	details := func(dir fundingstore.Direction, cents int64) *fundingstore.Movement {
		return &fundingstore.Movement{AccountID: "acct-2", Direction: dir, Amount: cents, Currency: "USD"}
	}
	for _, n := range []fundingstore.News{
		{Domain: funding.Transfer, BrokerID: "t-1", BrokerStatus: "COMPLETE", Details: details(fundingstore.Credit, 10000)},
		{Domain: funding.Transfer, BrokerID: "t-1", BrokerStatus: "RETURNED"},
		{Domain: funding.Transfer, BrokerID: "t-2", BrokerStatus: "RETURNED", Details: details(fundingstore.Credit, 700)},
		{Domain: funding.Transfer, BrokerID: "t-2", BrokerStatus: "COMPLETE"},
		{Domain: funding.Transfer, BrokerID: "t-3", BrokerStatus: "COMPLETE", Details: details(fundingstore.Debit, 300)},
	} {
		if _, err := s.Report(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if got := balance(t, s, "acct-2"); got != -300 {
		t.Fatalf("balance %d, want -300", got)
	}
	want := []string{"account.credited", "account.credit_reversed", "account.credited", "account.credit_reversed", "account.debited"}
	got := outboxRows(t, pool)
	for i := range got {
		got[i] = strings.Fields(got[i])[0]
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("outbox %q, want %q", got, want)
	}
}

func TestUnknownStatusAndUnknownRecordGoToReviewAndChangeNothing(t *testing.T) {
	s, pool := newStore(t)
	ctx := context.Background()
	if _, _, err := s.Intend(ctx, deposit("k1", "acct-1", 2500)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []fundingstore.News{
		{Domain: funding.Journal, BrokerID: "j-1", BrokerStatus: "teleported", IntentKey: "k1", Source: "test"},
		{Domain: funding.Transfer, BrokerID: "t-9", BrokerStatus: "COMPLETE", Source: "test"},
		{Domain: funding.Transfer, BrokerID: "t-10", BrokerStatus: "COMPLETE", Source: "test",
			Details: &fundingstore.Movement{AccountID: "acct-1", Direction: fundingstore.Credit, Amount: 0, Currency: "USD"}},
	} {
		r, err := s.Report(ctx, n)
		if err != nil || !r.Review {
			t.Fatalf("%+v: %+v, %v; want review", n, r, err)
		}
	}
	rs, err := s.Reviews(ctx)
	if err != nil || len(rs) != 3 || rs[0].BrokerStatus != "teleported" || rs[1].BrokerID != "t-9" || rs[2].BrokerID != "t-10" {
		t.Fatalf("reviews %+v, %v", rs, err)
	}
	m, _ := s.ByKey(ctx, "k1")
	if m.BrokerID != "" || m.Status != "" || len(outboxRows(t, pool)) != 0 {
		t.Fatalf("an unknown status changed the movement: %+v", m)
	}
}

// The seen set dedupes: a message seen before applies nothing, even one
// that only went to review, and the cursor never moves back.
func TestTakeDedupesOnTheSeenSetAndKeepsTheCursorMonotonic(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, _, err := s.Intend(ctx, deposit("k1", "acct-1", 2500)); err != nil {
		t.Fatal(err)
	}
	take := func(id, status string) bool {
		t.Helper()
		fresh, _, err := s.Take(ctx, fundingstore.Intake{Stream: "journals", DedupeKey: id, EventID: id, Payload: []byte(`{}`)},
			fundingstore.News{Domain: funding.Journal, BrokerID: "j-1", BrokerStatus: status, IntentKey: "k1", Source: "stream"})
		if err != nil {
			t.Fatal(err)
		}
		return fresh
	}
	if !take("01B", "weird") || take("01B", "weird") {
		t.Fatal("the second delivery of a message was taken as new")
	}
	if rs, _ := s.Reviews(ctx); len(rs) != 1 {
		t.Fatalf("%d reviews of one message delivered twice, want 1", len(rs))
	}
	take("01C", "executed")
	take("01A", "queued") // delivered late
	if c, _ := s.Cursor(ctx, "journals"); c != "01C" {
		t.Fatalf("cursor %q, want 01C", c)
	}
	if seen, _ := s.Seen(ctx, "journals", "01A"); !seen {
		t.Fatal("a message taken in is not in the seen set")
	}
	if got := balance(t, s, "acct-1"); got != 2500 {
		t.Fatalf("balance %d, want 2500", got)
	}
}

func TestOpenListsOnlyRecordsTheBrokerIsNotDoneWith(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	for i, st := range []string{"PENDING", "EXECUTED", "COMPLETE", "FAILED"} {
		if _, err := s.Report(ctx, fundingstore.News{Domain: funding.WalletTransfer, BrokerID: fmt.Sprintf("w-%d", i), BrokerStatus: st,
			Details: &fundingstore.Movement{AccountID: "acct-3", Direction: fundingstore.Credit, Amount: 100, Currency: "USD"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Intend(ctx, fundingstore.Movement{Domain: funding.WalletTransfer, IntentKey: "w-unanswered", AccountID: "acct-3", Direction: fundingstore.Debit, Amount: 1, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	ids := func(within time.Duration) string {
		t.Helper()
		open, err := s.Open(ctx, funding.WalletTransfer, within, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range open {
			ids = append(ids, m.BrokerID)
		}
		return fmt.Sprint(ids)
	}
	if got := ids(time.Hour); got != "[w-0 w-1 w-2]" {
		t.Fatalf("open %v, want [w-0 w-1 w-2] (completed within the window can still change; failed is final)", got)
	}
	if got := ids(0); got != "[w-0 w-1]" {
		t.Fatalf("open %v, want [w-0 w-1] (completed outside the window)", got)
	}
	un, err := s.Unanswered(ctx, funding.WalletTransfer)
	if err != nil || len(un) != 1 || un[0].IntentKey != "w-unanswered" {
		t.Fatalf("unanswered %+v, %v", un, err)
	}
}

// A write's answer and stream news about the same record, at the same
// moment, neither deadlock nor apply twice.
func TestAnswersAndNewsOfOneAccountConcurrentlyNeitherDeadlockNorDoubleApply(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	const n = 40
	for i := range n {
		if _, _, err := s.Intend(ctx, deposit(fmt.Sprintf("k%d", i), "acct-1", 100)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		key, id := fmt.Sprintf("k%d", i), fmt.Sprintf("j-%d", i)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make(chan error, 2)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			if _, err := s.Accepted(ctx, key, id); err != nil {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			if _, err := s.Report(ctx, fundingstore.News{Domain: funding.Journal, BrokerID: id, BrokerStatus: "executed", IntentKey: key}); err != nil {
				errs <- err
			}
		}()
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if got := balance(t, s, "acct-1"); got != n*100 {
		t.Fatalf("balance %d, want %d", got, n*100)
	}
}

// A stream message looks its record up before it holds the account's
// lock; a write's answer holding that lock may fold the stream's mirror
// of the record into the intent's row and delete it meanwhile (Accepted).
// The message is then applied to the intent's row, not failed with the
// row it found gone (which ended the stream and reconnected it).
func TestNewsWhoseRowIsFoldedIntoItsIntentWhileWaitingForTheAccountAppliesToTheIntent(t *testing.T) {
	s, pool := newStore(t)
	ctx := context.Background()
	intent, _, err := s.Intend(ctx, deposit("k-fold", "acct-f", 500))
	if err != nil {
		t.Fatal(err)
	}
	// The stream mirrored the journal under its broker id before the
	// write's answer named it.
	if _, err := s.Report(ctx, fundingstore.News{Domain: funding.Journal, BrokerID: "j-fold", BrokerStatus: "queued", Source: "test",
		Details: &fundingstore.Movement{AccountID: "acct-f", Direction: fundingstore.Credit, Amount: 500, Currency: "USD"}}); err != nil {
		t.Fatal(err)
	}
	orphan, err := s.ByBrokerID(ctx, funding.Journal, "j-fold")
	if err != nil {
		t.Fatal(err)
	}
	// The answer's transaction holds the account's lock while the next
	// stream message comes in.
	answer, taken := takeBehindTheAccountsLock(t, s, pool, "acct-f", "e-fold",
		fundingstore.News{Domain: funding.Journal, BrokerID: "j-fold", BrokerStatus: "executed", Source: "test"})
	defer answer.Rollback(ctx)
	// Accepted's fold: the mirror's row goes, the intent's takes the id.
	if _, err := answer.Exec(ctx, `delete from funding_movements where id = $1`, orphan.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := answer.Exec(ctx, `update funding_movements set broker_id = 'j-fold', status = 'PENDING', broker_status = 'queued' where id = $1`,
		intent.ID); err != nil {
		t.Fatal(err)
	}
	if err := answer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-taken; err != nil {
		t.Fatalf("take after the fold: %v", err)
	}
	m, err := s.ByKey(ctx, "k-fold")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != funding.Completed || balance(t, s, "acct-f") != 500 {
		t.Fatalf("intent %s %s, balance %d; want COMPLETED and 500", m.BrokerID, m.Status, balance(t, s, "acct-f"))
	}
}

// The journal stream's message finds its record's intent by key (the
// broker id not yet stored anywhere) and waits for the account; meanwhile
// the activities stream mirrors the record under its broker id. The
// message then applies to that mirror instead of giving the intent the
// broker id a second row holds (a unique violation, which ended the
// stream and reconnected it); the write's answer folds the two later.
func TestNewsFoundByKeyWhileAnotherStreamMirrorsTheRecordAppliesToTheMirror(t *testing.T) {
	s, pool := newStore(t)
	ctx := context.Background()
	if _, _, err := s.Intend(ctx, deposit("k-mirror", "acct-m", 700)); err != nil {
		t.Fatal(err)
	}
	other, taken := takeBehindTheAccountsLock(t, s, pool, "acct-m", "e-mirror",
		fundingstore.News{Domain: funding.Journal, BrokerID: "j-mirror", IntentKey: "k-mirror", BrokerStatus: "executed", Source: "test"})
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, `insert into funding_movements (domain, broker_id, account_id, direction, amount, currency, status, broker_status)
		values ('journal', 'j-mirror', 'acct-m', 'credit', 700, 'USD', 'PENDING', 'queued')`); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-taken; err != nil {
		t.Fatalf("take beside the mirror: %v", err)
	}
	m, err := s.ByBrokerID(ctx, funding.Journal, "j-mirror")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != funding.Completed || balance(t, s, "acct-m") != 700 {
		t.Fatalf("mirror %d %s, balance %d; want COMPLETED and 700", m.ID, m.Status, balance(t, s, "acct-m"))
	}
}

// takeBehindTheAccountsLock begins a transaction holding account's lock
// and takes a stream message with news in behind it; the message's
// outcome comes on taken once the transaction ends.
func takeBehindTheAccountsLock(t *testing.T, s *fundingstore.Store, pool *pgxpool.Pool, account, eventID string, news fundingstore.News) (pgx.Tx, chan error) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended('funding-account:' || $1, 0))`, account); err != nil {
		t.Fatal(err)
	}
	taken := make(chan error, 1)
	go func() {
		_, _, err := s.Take(ctx, fundingstore.Intake{Stream: "journals", DedupeKey: eventID, EventID: "01M8XF00000000000000000000", Payload: []byte(`{}`)}, news)
		taken <- err
	}()
	testkit.Eventually(t, 10*time.Second, "the message waits for the account's lock", func() error {
		var waiting int
		if err := pool.QueryRow(ctx, `select count(*) from pg_locks where locktype = 'advisory' and not granted
			and database = (select oid from pg_database where datname = current_database())`).Scan(&waiting); err != nil {
			return err
		}
		if waiting == 0 {
			return errors.New("no one waits")
		}
		return nil
	})
	return tx, taken
}
