// Package shippingconsumer adapts the orchestrator's shipping commands to
// the shipping store: each command is applied in the idempotent runner's
// transaction (the dedupe row, the shipment row and any reply commit
// together); the carrier is called afterwards by the shipper worker.
package shippingconsumer

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/shipping"
	"github.com/concordhq/concord/services/shipping/shippingstore"
)

// Topics the shipping service consumes (before any prefix).
var Topics = []string{contract.TypeShippingCreateShipment.Topic()}

// Types the shipping service acts on.
var Types = []contract.Type{contract.TypeShippingCreateShipment, contract.TypeShippingCancelShipment}

// Register adds the command handlers to mux. budget is how long a step may
// spend on carrier attempts before it is answered failed (retryable).
func Register(mux *idempotent.Mux, budget time.Duration, now func() time.Time) {
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.ShippingCreateShipmentV1, out outbox.Emitter) error {
		return shippingstore.ApplyCreate(ctx, tx, out, CreateCommand(ev.EventID, d), now(), budget)
	})
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.ShippingCancelShipmentV1, out outbox.Emitter) error {
		return shippingstore.ApplyCancel(ctx, tx, out, shipping.CancelCommand{CommandID: ev.EventID, Key: d.IdempotencyKey, SagaID: d.SagaID,
			Step: d.Step, OrderID: d.OrderID, ShipmentKey: d.ShipmentKey}, now(), budget)
	})
}

// CreateCommand is the domain's view of a create command.
func CreateCommand(eventID string, d contract.ShippingCreateShipmentV1) shipping.CreateCommand {
	items := make([]shipping.Item, len(d.Items))
	for i, it := range d.Items {
		items[i] = shipping.Item{SKU: it.SKU, Quantity: it.Quantity}
	}
	a := d.Address
	return shipping.CreateCommand{CommandID: eventID, Key: d.IdempotencyKey, SagaID: d.SagaID, Step: d.Step,
		Parcel: shipping.Parcel{OrderID: d.OrderID, Items: items,
			Address: shipping.Address{Line1: a.Line1, Line2: a.Line2, City: a.City, PostalCode: a.PostalCode, Country: a.Country}}}
}

// BatchHandler applies a batch's commands one after the other in the
// batch's transaction.
func BatchHandler(mux *idempotent.Mux) idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, out outbox.Emitter) error {
		for _, ev := range evs {
			if err := mux.Handle(ctx, tx, ev, out); err != nil {
				return err
			}
		}
		return nil
	}
}
