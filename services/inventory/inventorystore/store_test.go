package inventorystore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

// Many reservations race over two hot SKUs, each wanting both (listed in
// opposite orders); stock must never go negative, no reservation may be
// partial, and none may deadlock.
func TestConcurrentReservationsNeverOversellAndAreAllOrNothing(t *testing.T) {
	pool := testkit.NewPool(t, outbox.Migrate, inventorystore.Migrate)
	ctx := context.Background()
	if err := inventorystore.Receive(ctx, pool, []inventory.Line{{SKU: "A", Quantity: 7}, {SKU: "B", Quantity: 50}}); err != nil {
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
				return outbox.Writer{}.Emitting(ctx, tx, func(out outbox.Emitter) (err error) {
					st, err = inventorystore.Reserve(ctx, tx, out, inventorystore.ReserveRequest{OrderID: fmt.Sprintf("00000000-0000-7000-8000-%012d", i),
						Lines: lines, Amount: 1, Currency: "EUR"})
					return err
				})
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
	st, err := inventorystore.ListStock(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if wins != 7 || st[0].Available != 0 || st[0].Reserved != 7 || st[1].Reserved != 14 || st[1].Available != 36 {
		t.Fatalf("%d reservations held, stock %+v; want 7 held, A 0/7, B 36/14", wins, st)
	}
	// A duplicate order.created for a held order changes nothing.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := inventorystore.Reserve(ctx, tx, (&outbox.Buffer{}), inventorystore.ReserveRequest{OrderID: "00000000-0000-7000-8000-000000000000",
			Lines: []inventory.Line{{SKU: "B", Quantity: 2}}, Amount: 1, Currency: "EUR"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if st2, _ := inventorystore.ListStock(ctx, pool); st2[1] != st[1] {
		t.Fatalf("a repeated reservation moved stock: %+v → %+v", st[1], st2[1])
	}
}

// One batch decides its ops in order against the stock it locked: the
// scarce SKU goes to the first reservations only, a reservation created
// and cancelled in the same batch returns its stock, a repeated
// order.created changes nothing, and each reservation's status guards its
// commit and release. The stock the batch writes is what those decisions
// add up to.
func TestApplyBatchDecidesInOrder(t *testing.T) {
	pool := testkit.NewPool(t, outbox.Migrate, inventorystore.Migrate)
	ctx := context.Background()
	if err := inventorystore.Receive(ctx, pool, []inventory.Line{{SKU: "A", Quantity: 2}, {SKU: "B", Quantity: 10}}); err != nil {
		t.Fatal(err)
	}
	order := func(i int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012d", i) }
	reserve := func(i int, lines ...inventory.Line) inventorystore.Op {
		return inventorystore.Op{Reserve: &inventorystore.ReserveRequest{OrderID: order(i), Lines: lines, Amount: 1, Currency: "EUR"}}
	}
	act := func(i int, a inventory.Action, reason string) inventorystore.Op {
		return inventorystore.Op{OrderID: order(i), Action: a, Reason: reason}
	}
	ab := []inventory.Line{{SKU: "B", Quantity: 1}, {SKU: "A", Quantity: 1}}
	var out []inventorystore.Outcome
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
		buf := outbox.Writer{}.NewBuffer()
		defer func() {
			if err == nil {
				err = buf.Flush(ctx, tx)
			}
		}()
		out, err = inventorystore.ApplyBatch(ctx, tx, buf, []inventorystore.Op{
			reserve(1, ab...), // HELD: A 1/1
			reserve(2, ab...), // HELD: A 0/2
			reserve(3, ab...), // REJECTED: no A left, takes no B either
			act(2, inventory.Release, "order_cancelled"), // A back to 1 available
			reserve(4, ab...),                             // HELD: gets the released unit
			reserve(1, ab...),                             // repeated: nothing
			act(1, inventory.Commit, ""),                  // COMMITTED
			act(1, inventory.Commit, ""),                  // guarded: nothing
			act(3, inventory.Release, "payment_declined"), // rejected holds nothing
			act(9, inventory.Release, "order_cancelled"),  // unknown order: nothing
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []inventorystore.Outcome{{Status: "HELD"}, {Status: "HELD"}, {Status: "REJECTED"}, {Changed: true}, {Status: "HELD"},
		{Status: "HELD"}, {Changed: true}, {}, {}, {}}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v; want %v", out, want)
	}
	st, err := inventorystore.ListStock(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if want := (inventorystore.Stock{SKU: "A", Received: 2, Available: 0, Reserved: 1, Committed: 1}); st[0] != want {
		t.Fatalf("A %+v; want %+v", st[0], want)
	}
	if want := (inventorystore.Stock{SKU: "B", Received: 10, Available: 8, Reserved: 1, Committed: 1}); st[1] != want {
		t.Fatalf("B %+v; want %+v", st[1], want)
	}
	rows, err := pool.Query(ctx, `select order_id::text, status, coalesce(reason, '') from reservations order by order_id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var o, s, rs string
		err := r.Scan(&o, &s, &rs)
		return o[len(o)-1:] + " " + s + " " + rs, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[1 COMMITTED  2 RELEASED order_cancelled 3 REJECTED out_of_stock 4 HELD ]" {
		t.Fatalf("reservations %q", got)
	}
	if types := testkit.Strings(t, pool, `select event_type from outbox order by id`); fmt.Sprint(types) != "[inventory.reserved inventory.reserved inventory.rejected inventory.released inventory.reserved]" {
		t.Fatalf("events %v", types)
	}

	// A later batch sees the committed row: releasing it returns the stock.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
		out, err = inventorystore.ApplyBatch(ctx, tx, (&outbox.Buffer{}), []inventorystore.Op{act(1, inventory.Release, "order_cancelled"), act(4, inventory.Commit, "")})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	st, _ = inventorystore.ListStock(ctx, pool)
	if want := (inventorystore.Stock{SKU: "A", Received: 2, Available: 1, Reserved: 0, Committed: 1}); st[0] != want {
		t.Fatalf("A after the second batch %+v; want %+v", st[0], want)
	}
}
