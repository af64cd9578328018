package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/inventory/postgres"
)

// Many reservations race over two hot SKUs, each wanting both (listed in
// opposite orders); stock must never go negative, no reservation may be
// partial, and none may deadlock.
func TestConcurrentReservationsNeverOversellAndAreAllOrNothing(t *testing.T) {
	pool := testkit.NewPool(t)
	ctx := context.Background()
	if err := outbox.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Receive(ctx, pool, []inventory.Line{{SKU: "A", Quantity: 7}, {SKU: "B", Quantity: 50}}); err != nil {
		t.Fatal(err)
	}
	const n = 24
	var wg sync.WaitGroup
	held := make(chan bool, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lines := []inventory.Line{{SKU: "A", Quantity: 1}, {SKU: "B", Quantity: 2}}
			if i%2 == 1 {
				lines[0], lines[1] = lines[1], lines[0]
			}
			var st inventory.Status
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
				st, err = postgres.Reserve(ctx, tx, postgres.ReserveRequest{OrderID: fmt.Sprintf("00000000-0000-7000-8000-%012d", i),
					Lines: lines, Amount: 1, Currency: "EUR"})
				return err
			})
			if err != nil {
				t.Error(err)
			}
			held <- st == inventory.StatusHeld
		}()
	}
	wg.Wait()
	close(held)
	wins := 0
	for h := range held {
		if h {
			wins++
		}
	}
	st, err := postgres.ListStock(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if wins != 7 || st[0].Available != 0 || st[0].Reserved != 7 || st[1].Reserved != 14 || st[1].Available != 36 {
		t.Fatalf("%d reservations held, stock %+v; want 7 held, A 0/7, B 36/14", wins, st)
	}
	// A duplicate order.created for a held order changes nothing.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := postgres.Reserve(ctx, tx, postgres.ReserveRequest{OrderID: "00000000-0000-7000-8000-000000000000",
			Lines: []inventory.Line{{SKU: "B", Quantity: 2}}, Amount: 1, Currency: "EUR"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if st2, _ := postgres.ListStock(ctx, pool); st2[1] != st[1] {
		t.Fatalf("a repeated reservation moved stock: %+v → %+v", st[1], st2[1])
	}
}
