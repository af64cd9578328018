package paymentstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

const orderID = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d01"

func newDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return testkit.NewPool(t, outbox.Migrate, paymentstore.Migrate)
}

// newIntent stores the intent of an order for 100 EUR.
func newIntent(t *testing.T, pool *pgxpool.Pool, order string) (p paymentstore.Payment) {
	t.Helper()
	inTx(t, pool, func(tx pgx.Tx) (err error) {
		p, _, err = paymentstore.CreateIntent(context.Background(), tx, paymentstore.NewIntent{OrderID: order, Amount: 100, Currency: "EUR"})
		return err
	})
	return p
}

func inTx(t *testing.T, pool *pgxpool.Pool, f func(pgx.Tx) error) {
	t.Helper()
	if err := pgx.BeginFunc(context.Background(), pool, f); err != nil {
		t.Fatal(err)
	}
}

func outboxTypes(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	return testkit.Strings(t, pool, `select event_type from outbox order by id`)
}

func TestCanonicalWriterAppliesEachTransitionOnceAndEmitsOneEvent(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	var p paymentstore.Payment
	inTx(t, pool, func(tx pgx.Tx) (err error) {
		p, _, err = paymentstore.CreateIntent(ctx, tx, paymentstore.NewIntent{OrderID: orderID, Amount: 2500, Currency: "EUR", CustomerID: "c1"})
		return err
	})
	inTx(t, pool, func(tx pgx.Tx) error {
		_, err := paymentstore.MarkPaid(ctx, tx, outbox.Writer{}, p.ID, "succeeded", "test")
		if !errors.Is(err, paymentstore.ErrNoProviderID) {
			t.Errorf("MarkPaid without provider id: err = %v; want ErrNoProviderID", err)
		}
		return nil
	})
	inTx(t, pool, func(tx pgx.Tx) error { return paymentstore.AttachProvider(ctx, tx, p.ID, "pi_1") })
	for i, want := range []bool{true, false} {
		inTx(t, pool, func(tx pgx.Tx) error {
			changed, err := paymentstore.MarkPaid(ctx, tx, outbox.Writer{}, p.ID, "succeeded", "test")
			if changed != want {
				t.Errorf("MarkPaid #%d changed = %v; want %v", i+1, changed, want)
			}
			return err
		})
	}
	inTx(t, pool, func(tx pgx.Tx) error {
		changed, err := paymentstore.MarkFailed(ctx, tx, outbox.Writer{}, p.ID, "requires_payment_method", "late-webhook", "card_declined")
		if changed {
			t.Error("MarkFailed after paid changed the payment; a late decline is stale")
		}
		return err
	})
	inTx(t, pool, func(tx pgx.Tx) error {
		changed, err := paymentstore.MarkRefunded(ctx, tx, outbox.Writer{}, p.ID, "refunded", "test")
		if !changed {
			t.Error("MarkRefunded of a paid payment did not change it")
		}
		return err
	})
	got, err := paymentstore.Get(ctx, pool, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != payment.StatusRefunded || got.Version != 2 {
		t.Errorf("payment = %s version %d; want refunded version 2", got.Status, got.Version)
	}
	if types := outboxTypes(t, pool); len(types) != 2 || types[0] != "payment.processed" || types[1] != "payment.refunded" {
		t.Errorf("outbox = %v; want [payment.processed payment.refunded]", types)
	}
	inTx(t, pool, func(tx pgx.Tx) error {
		err := paymentstore.AttachProvider(ctx, tx, p.ID, "pi_other")
		if !errors.Is(err, paymentstore.ErrProviderMismatch) {
			t.Errorf("AttachProvider with another id: err = %v; want ErrProviderMismatch", err)
		}
		return nil
	})
}

func TestConcurrentWritersOfOnePaymentEmitOneEvent(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	p := newIntent(t, pool, orderID)
	inTx(t, pool, func(tx pgx.Tx) error { return paymentstore.AttachProvider(ctx, tx, p.ID, "pi_1") })
	const n = 8
	changed := make(chan bool, n)
	for range n {
		go func() {
			var c bool
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
				c, err = paymentstore.MarkPaid(ctx, tx, outbox.Writer{}, p.ID, "succeeded", "race")
				return err
			})
			if err != nil {
				t.Error(err)
			}
			changed <- c
		}()
	}
	wins := 0
	for range n {
		if <-changed {
			wins++
		}
	}
	if wins != 1 || len(outboxTypes(t, pool)) != 1 {
		t.Fatalf("%d writers changed the payment, outbox has %d rows; want exactly 1 and 1", wins, len(outboxTypes(t, pool)))
	}
}

// Record ties the payment to the provider's id in the transition itself
// (the charger and the webhook learn both at once), refuses a second
// provider payment, and keeps the id when the status does not move.
func TestRecordAttachesTheProviderIDWithTheTransition(t *testing.T) {
	// Record in the caller's transaction and RecordAlone in its own must
	// agree in everything.
	for _, alone := range []bool{false, true} {
		t.Run(map[bool]string{false: "Record", true: "RecordAlone"}[alone], func(t *testing.T) { testRecord(t, alone) })
	}
}

func testRecord(t *testing.T, alone bool) {
	pool := newDB(t)
	ctx := context.Background()
	intent := func(order string) paymentstore.Payment { return newIntent(t, pool, order) }
	record := func(id int64, o paymentstore.Observation) (changed bool, err error) {
		if alone {
			return paymentstore.RecordAlone(ctx, pool, outbox.Writer{}, id, o)
		}
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
			changed, err = paymentstore.Record(ctx, tx, outbox.Writer{}, id, o)
			return err
		})
		return changed, err
	}
	paid := intent(orderID)
	if changed, err := record(paid.ID, paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: "pi_1", Observed: "succeeded", Source: "sync"}); err != nil || !changed {
		t.Fatalf("Record paid with a provider id: changed %v, err %v", changed, err)
	}
	if got, _ := paymentstore.Get(ctx, pool, paid.ID); got.ProviderPaymentID != "pi_1" || got.Status != payment.StatusPaid {
		t.Fatalf("after Record: provider id %q status %s; want pi_1 paid", got.ProviderPaymentID, got.Status)
	}
	if _, err := record(paid.ID, paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: "pi_2", Source: "webhook"}); !errors.Is(err, paymentstore.ErrProviderMismatch) {
		t.Fatalf("Record with another provider id: err = %v; want ErrProviderMismatch", err)
	}
	// The same outcome again (the webhook after the charger's answer, or
	// the other way round) changes nothing and does not even rewrite the
	// row: its xmin, the transaction that last wrote it, stays.
	rowVersion := func() (xmin int64) {
		if err := pool.QueryRow(ctx, `select xmin::text::bigint from payments where id = $1`, paid.ID).Scan(&xmin); err != nil {
			t.Fatal(err)
		}
		return xmin
	}
	before := rowVersion()
	if changed, err := record(paid.ID, paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: "pi_1", Observed: "succeeded", Source: "webhook"}); err != nil || changed {
		t.Fatalf("Record of the same outcome again: changed %v, err %v; want unchanged", changed, err)
	}
	if after := rowVersion(); after != before {
		t.Fatalf("Record of an outcome and observation the row holds rewrote it (xmin %d → %d)", before, after)
	}
	// News that moves nothing is still kept for the reconciler.
	if _, err := record(paid.ID, paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: "pi_1", Observed: "processing", Source: "poller"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := paymentstore.Get(ctx, pool, paid.ID); got.ObservedStatus != "processing" || got.Status != payment.StatusPaid {
		t.Fatalf("after news that moves nothing: observed %q status %s; want processing, still paid", got.ObservedStatus, got.Status)
	}

	// A decline that does not move the payment (it failed already) still
	// leaves the provider's id on it.
	failed := intent("0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d02")
	if _, err := record(failed.ID, paymentstore.Observation{To: payment.StatusFailed, Observed: "requires_payment_method", Source: "sync"}); err != nil {
		t.Fatal(err)
	}
	if changed, err := record(failed.ID, paymentstore.Observation{To: payment.StatusFailed, ProviderPaymentID: "pi_3", Observed: "requires_payment_method", Source: "webhook"}); err != nil || changed {
		t.Fatalf("second decline: changed %v, err %v; want unchanged", changed, err)
	}
	if got, _ := paymentstore.Get(ctx, pool, failed.ID); got.ProviderPaymentID != "pi_3" || got.FailureReason != "declined" {
		t.Fatalf("declined payment: provider id %q reason %q; want pi_3 and the default reason declined", got.ProviderPaymentID, got.FailureReason)
	}
	if types := outboxTypes(t, pool); !slices.Equal(types, []string{"payment.processed", "payment.failed"}) {
		t.Fatalf("outbox = %v; want one payment.processed and one payment.failed", types)
	}
}

// A batch of reservations becomes intents in one statement; an order
// already cancelled gets none, and a redelivered reservation adds nothing.
func TestCreateIntentsSkipsCancelledAndExistingOrders(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	const cancelled, again = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d0c", "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d0a"
	inTx(t, pool, func(tx pgx.Tx) error {
		if _, err := paymentstore.RecordCancelledOrder(ctx, tx, cancelled, "timeout"); err != nil {
			return err
		}
		_, err := paymentstore.CreateIntents(ctx, tx, []paymentstore.NewIntent{{OrderID: again, Amount: 1, Currency: "EUR"}})
		return err
	})
	var n int64
	inTx(t, pool, func(tx pgx.Tx) (err error) {
		n, err = paymentstore.CreateIntents(ctx, tx, []paymentstore.NewIntent{
			{OrderID: orderID, Amount: 100, Currency: "EUR", PaymentMethod: "pm_card_visa"},
			{OrderID: cancelled, Amount: 200, Currency: "EUR"},
			{OrderID: again, Amount: 300, Currency: "EUR"},
			{OrderID: orderID, Amount: 100, Currency: "EUR"}, // the same reservation twice in one batch
		})
		return err
	})
	if n != 1 {
		t.Fatalf("CreateIntents created %d; want 1 (cancelled, existing and repeated orders skipped)", n)
	}
	p, err := paymentstore.ByOrder(ctx, pool, orderID)
	if err != nil || p.Amount != 100 || p.IdempotencyKey != payment.IdempotencyKey(orderID) || p.Status != payment.StatusPending {
		t.Fatalf("intent = %+v, %v", p, err)
	}
	if _, err := paymentstore.ByOrder(ctx, pool, cancelled); !errors.Is(err, paymentstore.ErrNotFound) {
		t.Fatalf("cancelled order got an intent: %v", err)
	}
	if p, _ := paymentstore.ByOrder(ctx, pool, again); p.Amount != 1 {
		t.Fatalf("existing intent changed to amount %d", p.Amount)
	}
}

// newDBWithConns is newDB with a pool of at most conns connections; it
// returns the database's URL too.
func newDBWithConns(t *testing.T, conns int) (*pgxpool.Pool, string) {
	t.Helper()
	url := testkit.NewDatabase(t, testkit.PostgresURL(t))
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	pool := testkit.Pool(t, url+sep+"pool_max_conns="+strconv.Itoa(conns))
	for _, m := range []func(context.Context, *pgxpool.Pool) error{outbox.Migrate, paymentstore.Migrate} {
		if err := m(context.Background(), pool); err != nil {
			t.Fatal(err)
		}
	}
	return pool, url
}

// RecordAlone runs its own transaction on a pooled connection; a failure
// inside it must not hand the next user a connection stuck in an aborted
// transaction. With one connection in the pool, the next call gets the
// same one.
func TestRecordAloneLeavesTheConnectionClean(t *testing.T) {
	pool, url := newDBWithConns(t, 1)
	ctx := context.Background()
	p := newIntent(t, pool, orderID)
	if _, err := paymentstore.RecordAlone(ctx, pool, outbox.Writer{}, p.ID+1000, paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: "pi_x"}); !errors.Is(err, paymentstore.ErrNotFound) {
		t.Fatalf("RecordAlone of a missing payment: %v; want ErrNotFound", err)
	}
	// Paid without a provider id fails after the lock, in the planning.
	if _, err := paymentstore.RecordAlone(ctx, pool, outbox.Writer{}, p.ID, paymentstore.Observation{To: payment.StatusPaid}); !errors.Is(err, paymentstore.ErrNoProviderID) {
		t.Fatalf("RecordAlone paid without a provider id: %v; want ErrNoProviderID", err)
	}
	if changed, err := paymentstore.RecordAlone(ctx, pool, outbox.Writer{}, p.ID, paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: "pi_1", Source: "sync"}); err != nil || !changed {
		t.Fatalf("RecordAlone after failures: changed %v, err %v", changed, err)
	}
	// Committed: another connection sees it.
	other := testkit.Pool(t, url)
	if got, err := paymentstore.Get(ctx, other, p.ID); err != nil || got.Status != payment.StatusPaid {
		t.Fatalf("from another connection: %s, %v; want paid", got.Status, err)
	}
}

// Concurrent RecordAlone calls for one payment serialise on its row lock:
// one transition, one event.
func TestConcurrentRecordAloneEmitsOneEvent(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	p := newIntent(t, pool, orderID)
	const n = 8
	var wg sync.WaitGroup
	var wins atomic.Int32
	for range n {
		wg.Go(func() {
			changed, err := paymentstore.RecordAlone(ctx, pool, outbox.Writer{}, p.ID, paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: "pi_1", Source: "race"})
			if err != nil {
				t.Error(err)
			}
			if changed {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || len(outboxTypes(t, pool)) != 1 {
		t.Fatalf("%d of %d concurrent writers changed the payment, %d events; want 1 and 1", wins.Load(), n, len(outboxTypes(t, pool)))
	}
}

// The canonical writer locks the payment's row before it decides, so a
// writer that comes while another has a transition in flight waits for
// that one to commit and then decides on its result: nothing left to do.
// Without the lock every writer decides on the pending status it read, and
// each applies the transition and emits its event once the first commits.
//
// The first writer holds its transaction open, with the transition made,
// until every other writer is seen waiting on a lock in PostgreSQL; only
// then does it commit. The interleaving is forced, not left to timing.
func TestWritersQueuedOnThePaymentsRowLockSeeTheFirstTransitionAndChangeNothing(t *testing.T) {
	const others = 4 // half Record in a transaction of the caller's, half RecordAlone
	pool, _ := newDBWithConns(t, others+2)
	ctx := context.Background()
	p := newIntent(t, pool, orderID)
	paid := func(source string) paymentstore.Observation {
		return paymentstore.Observation{To: payment.StatusPaid, ProviderPaymentID: "pi_1", Observed: "succeeded", Source: source}
	}
	type outcome struct {
		writer  int
		changed bool
		err     error
	}
	outcomes := make(chan outcome, others)
	var wg sync.WaitGroup
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if changed, err := paymentstore.Record(ctx, tx, outbox.Writer{}, p.ID, paid("first")); err != nil || !changed {
			return fmt.Errorf("first writer: changed %v, err %v; want the transition", changed, err)
		}
		var holder int32
		if err := tx.QueryRow(ctx, `select pg_backend_pid()`).Scan(&holder); err != nil {
			return err
		}
		for i := range others {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				o := outcome{writer: i}
				if i%2 == 0 {
					o.changed, o.err = paymentstore.RecordAlone(ctx, pool, outbox.Writer{}, p.ID, paid(fmt.Sprintf("other-%d", i)))
				} else {
					o.err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
						o.changed, err = paymentstore.Record(ctx, tx, outbox.Writer{}, p.ID, paid(fmt.Sprintf("other-%d", i)))
						return err
					})
				}
				outcomes <- o
			})
		}
		return lockWaiters(ctx, pool, holder, others, 10*time.Second)
	})
	wg.Wait()
	close(outcomes)
	if err != nil {
		t.Fatal(err)
	}
	for o := range outcomes {
		if o.err != nil || o.changed {
			t.Errorf("writer %d after the first committed: changed %v, err %v; want unchanged", o.writer, o.changed, o.err)
		}
	}
	got, err := paymentstore.Get(ctx, pool, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	transitions := testkit.Strings(t, pool, `select source from payment_transitions where payment_id = $1 and to_status = 'paid' order by id`, p.ID)
	events := outboxTypes(t, pool)
	if got.Status != payment.StatusPaid || got.Version != 1 || !slices.Equal(transitions, []string{"first"}) || len(events) != 1 {
		t.Fatalf("after %d writers queued behind the first: payment %s v%d, transitions to paid by %v, outbox %v; "+
			"want paid v1, one transition by the first writer, one payment.processed", others, got.Status, got.Version, transitions, events)
	}
}

// lockWaiters waits until n backends other than holder, on pool's
// database, are waiting for a lock, and fails after timeout.
func lockWaiters(ctx context.Context, pool *pgxpool.Pool, holder int32, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting int
		if err := pool.QueryRow(ctx, `select count(*) from pg_stat_activity
			where datname = current_database() and pid <> $1 and wait_event_type = 'Lock'`, holder).Scan(&waiting); err != nil {
			return fmt.Errorf("counting writers waiting for a lock: %w", err)
		}
		if waiting >= n {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%d writers waiting for a lock after %s; want %d: %w", waiting, timeout, n, ctx.Err())
		}
	}
}
