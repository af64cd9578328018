package inventorystore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

// recorder is an Emitter that keeps what was emitted (validated as the
// runner's buffer would).
type recorder struct{ evs []outbox.Event }

func (r *recorder) Emit(ev outbox.Event) (schemas.Envelope, error) {
	env, _, err := outbox.Prepare(ev)
	if err == nil {
		r.evs = append(r.evs, ev)
	}
	return env, err
}

// The orchestrated saga's stock commands: each is applied once per order
// and answered with saga.step_replied (the same outcome for a repeat),
// never with the choreographed inventory.* events; a release that comes
// first refuses the late reservation.
func TestSagaStockCommandsApplyOnceAndAnswerEveryRepeatAlike(t *testing.T) {
	pool := testkit.NewPool(t, outbox.Migrate, inventorystore.Migrate)
	ctx := context.Background()
	if err := inventorystore.Receive(ctx, pool, []inventory.Line{{SKU: "A", Quantity: 5}}); err != nil {
		t.Fatal(err)
	}
	order := func(n int) string { return fmt.Sprintf("00000000-0000-7000-8000-%012d", n) }
	cmd := func(o string, typ contract.Type, step string) *inventorystore.SagaCommand {
		return &inventorystore.SagaCommand{SagaID: o, Step: step, Key: o + ":" + step, Type: typ, ID: schemas.NewEventID()}
	}
	reserve := func(o string, q int64) inventorystore.Op {
		return inventorystore.Op{Reserve: &inventorystore.ReserveRequest{OrderID: o, Lines: []inventory.Line{{SKU: "A", Quantity: q}}},
			Command: cmd(o, contract.TypeInventoryReserveStock, "reserve_inventory")}
	}
	release := func(o string) inventorystore.Op {
		return inventorystore.Op{OrderID: o, Action: inventory.Release, Reason: inventorystore.ReasonSagaCompensated,
			Command: cmd(o, contract.TypeInventoryReleaseStock, "reserve_inventory")}
	}
	firstReserve := map[string]string{}
	apply := func(op inventorystore.Op) string {
		t.Helper()
		rec := &recorder{}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := inventorystore.ApplyBatch(ctx, tx, rec, []inventorystore.Op{op})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(rec.evs) != 1 {
			t.Fatalf("%d events emitted, want one reply", len(rec.evs))
		}
		r, ok := rec.evs[0].Payload.(contract.SagaStepRepliedV1)
		if !ok {
			t.Fatalf("emitted %T, want a saga reply", rec.evs[0].Payload)
		}
		wantID := op.Command.ID
		if id, ok := firstReserve[op.OrderID+op.Command.Key]; ok && op.Reserve != nil {
			wantID = id // a repeat names the first command
		} else if op.Reserve != nil {
			firstReserve[op.OrderID+op.Command.Key] = op.Command.ID
		}
		if r.CommandID != wantID || r.IdempotencyKey != op.Command.Key || string(r.CommandType) != string(op.Command.Type) {
			t.Fatalf("reply %+v answers another command than %+v (want command id %s)", r, op.Command, wantID)
		}
		return string(r.Outcome) + " " + r.Reason
	}
	stock := func() inventorystore.Stock {
		t.Helper()
		st, err := inventorystore.ListStock(ctx, pool)
		if err != nil {
			t.Fatal(err)
		}
		return st[0]
	}
	steps := []struct {
		name      string
		op        inventorystore.Op
		want      string
		available int64
		reserved  int64
	}{
		{"reserve", reserve(order(1), 3), "succeeded ", 2, 3},
		{"the same reserve again", reserve(order(1), 3), "succeeded ", 2, 3},
		{"reserve without stock", reserve(order(2), 3), "failed out_of_stock", 2, 3},
		{"that again", reserve(order(2), 3), "failed out_of_stock", 2, 3},
		{"release", release(order(1)), "succeeded ", 5, 0},
		{"release again", release(order(1)), "succeeded ", 5, 0},
		{"release of a rejected reservation", release(order(2)), "succeeded ", 5, 0},
		{"release before the reservation", release(order(3)), "succeeded ", 5, 0},
		{"the late reservation", reserve(order(3), 1), "failed " + inventorystore.ReasonReleasedBeforeReserved, 5, 0},
		{"another reservation", reserve(order(4), 4), "succeeded ", 1, 4},
	}
	for _, s := range steps {
		if got := apply(s.op); got != s.want {
			t.Errorf("%s: %q, want %q", s.name, got, s.want)
		}
		if st := stock(); st.Available != s.available || st.Reserved != s.reserved {
			t.Errorf("%s: available %d reserved %d, want %d %d", s.name, st.Available, st.Reserved, s.available, s.reserved)
		}
	}
	// saga.finished COMPLETED commits, as the consumer maps it.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := inventorystore.ApplyBatch(ctx, tx, &recorder{}, []inventorystore.Op{{OrderID: order(4), Action: inventory.Commit}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if st := stock(); st.Reserved != 0 || st.Committed != 4 || st.Available != 1 {
		t.Errorf("after commit: %+v", st)
	}
}
