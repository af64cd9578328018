package shippingstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/shipping"
	"github.com/concordhq/concord/services/shipping/shippingstore"
)

func create(id string) shipping.CreateCommand {
	return shipping.CreateCommand{CommandID: id, Key: "s1:create_shipment", SagaID: "s1", Step: "create_shipment",
		Parcel: shipping.Parcel{OrderID: "o1", Address: shipping.Address{Line1: "1 Main St", City: "Berlin", PostalCode: "10115", Country: "DE"},
			Items: []shipping.Item{{SKU: "SKU-1", Quantity: 1}}}}
}

// apply runs f in a transaction with an emitter, as the consumer's runner does.
func apply(t *testing.T, pool *pgxpool.Pool, f func(ctx context.Context, tx pgx.Tx, out outbox.Emitter) error) {
	t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return outbox.Writer{}.Emitting(ctx, tx, func(out outbox.Emitter) error { return f(ctx, tx, out) })
	}); err != nil {
		t.Fatal(err)
	}
}

// A cancellation that arrives while an attempt holds the row's lease must
// not start a second attempt beside it: the second could look the key up
// before the first call lands and settle as never created a shipment the
// carrier is creating.
func TestACommandDoesNotCutTheLeaseOfTheAttemptInFlight(t *testing.T) {
	pool := testkit.NewPool(t, outbox.Migrate, shippingstore.Migrate)
	ctx := context.Background()
	apply(t, pool, func(ctx context.Context, tx pgx.Tx, out outbox.Emitter) error {
		return shippingstore.ApplyCreate(ctx, tx, out, create("01a230b5-c0b1-70e1-8d17-07112241c49f"), time.Now(), time.Minute)
	})
	rows, err := shippingstore.Claim(ctx, pool, 10, time.Minute)
	if err != nil || len(rows) != 1 {
		t.Fatalf("claim: %d rows, %v", len(rows), err)
	}
	if err := shippingstore.CountCreateCall(ctx, pool, rows[0].ID); err != nil {
		t.Fatal(err)
	}
	apply(t, pool, func(ctx context.Context, tx pgx.Tx, out outbox.Emitter) error {
		return shippingstore.ApplyCancel(ctx, tx, out, shipping.CancelCommand{CommandID: "01a230b5-c0b1-70e1-8d17-07112241c4a0",
			Key: "s1:create_shipment_compensate", SagaID: "s1", Step: "create_shipment", OrderID: "o1", ShipmentKey: "s1:create_shipment"},
			time.Now(), time.Minute)
	})
	if again, err := shippingstore.Claim(ctx, pool, 10, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("a second attempt was claimed beside the one in flight: %d rows, %v", len(again), err)
	}
	// The attempt records what the carrier said and releases the lease:
	// the cancellation is due at once.
	if err := shippingstore.Update(ctx, pool, outbox.Writer{}, rows[0].ID, time.Now(), func(s *shipping.Shipment) []shipping.Reply {
		return s.Created("shp_1", "TRK_1")
	}); err != nil {
		t.Fatal(err)
	}
	next, err := shippingstore.Claim(ctx, pool, 10, time.Minute)
	if err != nil || len(next) != 1 || shipping.Next(next[0].State(), time.Now()) != shipping.Cancel {
		t.Fatalf("after the release: %+v, %v", next, err)
	}
}

// The state and the reply it owes commit together or not at all.
func TestAReplyThatCannotBeWrittenRollsTheOutcomeBack(t *testing.T) {
	pool := testkit.NewPool(t, outbox.Migrate, shippingstore.Migrate)
	ctx := context.Background()
	apply(t, pool, func(ctx context.Context, tx pgx.Tx, out outbox.Emitter) error {
		return shippingstore.ApplyCreate(ctx, tx, out, create("01a230b5-c0b1-70e1-8d17-07112241c49f"), time.Now(), time.Minute)
	})
	row, err := shippingstore.ByKey(ctx, pool, "s1:create_shipment")
	if err != nil {
		t.Fatal(err)
	}
	err = shippingstore.Update(ctx, pool, outbox.Writer{}, row.ID, time.Now(), func(s *shipping.Shipment) []shipping.Reply {
		r := s.Created("shp_1", "TRK_1")
		r[0].Step = "Not A Step" // the schema refuses it
		return r
	})
	if err == nil {
		t.Fatal("an invalid reply was accepted")
	}
	after, err := shippingstore.ByKey(ctx, pool, "s1:create_shipment")
	if err != nil {
		t.Fatal(err)
	}
	if after.Status != shipping.StatusPending || after.CarrierID != "" || after.Create.Answer != nil {
		t.Fatalf("the outcome committed without its reply: %+v", after.Shipment)
	}
	if n := testkit.Count(t, pool, `select count(*) from outbox`); n != 0 {
		t.Fatalf("%d outbox rows", n)
	}
	if err := shippingstore.Update(ctx, pool, outbox.Writer{}, row.ID, time.Now(), func(s *shipping.Shipment) []shipping.Reply {
		return s.Created("shp_1", "TRK_1")
	}); err != nil {
		t.Fatal(err)
	}
	if n := testkit.Count(t, pool, `select count(*) from outbox where event_type = 'saga.step_replied'`); n != 1 {
		t.Fatalf("%d replies after the outcome committed", n)
	}
}
