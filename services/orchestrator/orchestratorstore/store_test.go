package orchestratorstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/orchestrator"
	"github.com/concordhq/concord/services/orchestrator/orchestratorstore"
)

// Two sweepers (two instances) racing over the same due sagas: each saga
// is moved by one of them, so each timed-out command is sent again once.
func TestConcurrentSweepersSendEachTimedOutCommandOnce(t *testing.T) {
	pool := testkit.NewPool(t, outbox.Migrate, orchestratorstore.Migrate)
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	store := &orchestratorstore.Store{Def: orchestrator.Checkout(orchestrator.DefaultPolicy),
		Now: func() time.Time { return time.Unix(0, clock.Load()) }}
	const n = 60
	for range n {
		id := schemas.NewEventID()
		req := contract.SagaCheckoutRequestedV1{SagaID: id, OrderID: id, CustomerID: "c", Currency: "USD", TotalAmount: 100,
			Items:           []contract.SagaCheckoutRequestedV1Item{{SKU: "A", Quantity: 1, UnitPrice: 100}},
			ShippingAddress: &contract.SagaCheckoutRequestedV1ShippingAddress{Line1: "1", City: "X", PostalCode: "1", Country: "US"}}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return store.Outbox.Emitting(ctx, tx, func(out outbox.Emitter) error { return store.Start(ctx, tx, out, schemas.NewEventID(), req) })
		}); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(int64(time.Hour)) // every first command timed out
	var wg sync.WaitGroup
	var moved atomic.Int64
	for range 2 {
		wg.Go(func() {
			for {
				m, err := store.Sweep(ctx, pool, 5)
				if err != nil {
					t.Error(err)
					return
				}
				moved.Add(int64(m))
				if m == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if moved.Load() != n {
		t.Errorf("sweepers moved %d sagas, want %d", moved.Load(), n)
	}
	if bad := testkit.Count(t, pool, `select count(*) from (select partition_key from outbox where event_type = 'payment.authorize_hold'
		group by partition_key having count(*) <> 2) q`); bad != 0 {
		t.Errorf("%d sagas sent their command other than twice", bad)
	}
	if bad := testkit.Count(t, pool, `select count(*) from saga_steps where attempts <> 2`); bad != 0 {
		t.Errorf("%d steps with attempts other than 2", bad)
	}
}
