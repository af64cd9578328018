package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/postgres"
)

const orderID = "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d01"

func newDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := testkit.NewPool(t)
	ctx := context.Background()
	if err := outbox.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

func inTx(t *testing.T, pool *pgxpool.Pool, f func(pgx.Tx) error) {
	t.Helper()
	if err := pgx.BeginFunc(context.Background(), pool, f); err != nil {
		t.Fatal(err)
	}
}

func outboxTypes(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `select event_type from outbox order by id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCanonicalWriterAppliesEachTransitionOnceAndEmitsOneEvent(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	var p postgres.Payment
	inTx(t, pool, func(tx pgx.Tx) (err error) {
		p, _, err = postgres.CreateIntent(ctx, tx, postgres.NewIntent{OrderID: orderID, Amount: 2500, Currency: "EUR", CustomerID: "c1"})
		return err
	})
	inTx(t, pool, func(tx pgx.Tx) error {
		_, err := postgres.MarkPaid(ctx, tx, p.ID, "succeeded", "test")
		if !errors.Is(err, postgres.ErrNoProviderID) {
			t.Errorf("MarkPaid without provider id: err = %v; want ErrNoProviderID", err)
		}
		return nil
	})
	inTx(t, pool, func(tx pgx.Tx) error { return postgres.AttachProvider(ctx, tx, p.ID, "pi_1") })
	for i, want := range []bool{true, false} {
		inTx(t, pool, func(tx pgx.Tx) error {
			changed, err := postgres.MarkPaid(ctx, tx, p.ID, "succeeded", "test")
			if changed != want {
				t.Errorf("MarkPaid #%d changed = %v; want %v", i+1, changed, want)
			}
			return err
		})
	}
	inTx(t, pool, func(tx pgx.Tx) error {
		changed, err := postgres.MarkFailed(ctx, tx, p.ID, "requires_payment_method", "late-webhook", "card_declined")
		if changed {
			t.Error("MarkFailed after paid changed the payment; a late decline is stale")
		}
		return err
	})
	inTx(t, pool, func(tx pgx.Tx) error {
		changed, err := postgres.MarkRefunded(ctx, tx, p.ID, "refunded", "test")
		if !changed {
			t.Error("MarkRefunded of a paid payment did not change it")
		}
		return err
	})
	got, err := postgres.Get(ctx, pool, p.ID)
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
		err := postgres.AttachProvider(ctx, tx, p.ID, "pi_other")
		if !errors.Is(err, postgres.ErrProviderMismatch) {
			t.Errorf("AttachProvider with another id: err = %v; want ErrProviderMismatch", err)
		}
		return nil
	})
}

func TestConcurrentWritersOfOnePaymentEmitOneEvent(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	var p postgres.Payment
	inTx(t, pool, func(tx pgx.Tx) (err error) {
		p, _, err = postgres.CreateIntent(ctx, tx, postgres.NewIntent{OrderID: orderID, Amount: 100, Currency: "EUR"})
		if err != nil {
			return err
		}
		return postgres.AttachProvider(ctx, tx, p.ID, "pi_1")
	})
	const n = 8
	changed := make(chan bool, n)
	for range n {
		go func() {
			var c bool
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
				c, err = postgres.MarkPaid(ctx, tx, p.ID, "succeeded", "race")
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
