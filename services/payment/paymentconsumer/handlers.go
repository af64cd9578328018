// Package paymentconsumer adapts the saga's events to the payment store. Handlers
// only write rows; the charger makes the provider calls once those rows
// are committed.
package paymentconsumer

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

// Topics the payment service consumes (before any prefix).
var Topics = []string{contract.TypeInventoryReserved.Topic(), contract.TypeOrderCancelled.Topic()}

// Types the saga's handlers act on (see Register).
var Types = []contract.Type{contract.TypeInventoryReserved, contract.TypeOrderCancelled}

// DefaultPaymentMethod is charged when a reservation names none.
const DefaultPaymentMethod = "pm_card_visa"

// Register adds the saga's handlers to mux: inventory.reserved stores the
// payment intent (unless the order was already cancelled); order.cancelled
// marks the order so a payment that is or becomes paid gets refunded.
// BatchHandler applies the same handlers with the intents of a batch
// written together.
func Register(mux *idempotent.Mux) {
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.InventoryReservedV2, _ outbox.Emitter) error {
		in, err := intentOf(ev, d)
		if err != nil {
			return err
		}
		_, err = paymentstore.CreateIntents(ctx, tx, []paymentstore.NewIntent{in})
		return err
	})
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, _ idempotent.Event, d contract.OrderCancelledV1, _ outbox.Emitter) error {
		_, err := paymentstore.RecordCancelledOrder(ctx, tx, d.OrderID, d.Reason)
		return err
	})
}

// intentOf reads the intent a reservation asks for; a reservation without
// an amount and currency (one written before inventory.reserved v2) cannot
// be charged: a permanent failure of that event.
func intentOf(ev idempotent.Event, d contract.InventoryReservedV2) (paymentstore.NewIntent, error) {
	if d.Currency == "" || d.Amount == nil {
		return paymentstore.NewIntent{}, idempotent.Permanent(fmt.Errorf("event %s (order %s): reservation carries no amount and currency", ev.EventID, d.OrderID))
	}
	method := d.PaymentMethod
	if method == "" {
		method = DefaultPaymentMethod
	}
	return paymentstore.NewIntent{OrderID: d.OrderID, Amount: *d.Amount, Currency: d.Currency, CustomerID: d.CustomerID,
		PaymentMethod: method}, nil
}

// BatchHandler applies a consumer batch with mux (Register's handlers plus
// whatever else the service consumes), in offset order, except that
// consecutive reservations are stored with one CreateIntents. Pending
// intents are written before any other handled event, so a cancellation
// later in the batch still finds the intent it must mark. The orders of
// the batch are locked first, in id order (see paymentstore.LockOrders).
func BatchHandler(mux *idempotent.Mux) idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, out outbox.Emitter) error {
		// Decode what the batch locks and reserves once, up front.
		intents := make([]*paymentstore.NewIntent, len(evs)) // by event; nil: not a reservation
		var ids []string
		for i, ev := range evs {
			switch ev.Type() {
			case contract.TypeInventoryReserved:
				d, err := idempotent.Decode[contract.InventoryReservedV2](ev)
				if err != nil {
					return err
				}
				in, err := intentOf(ev, d)
				if err != nil {
					return err
				}
				intents[i] = &in
				ids = append(ids, d.OrderID)
			case contract.TypeOrderCancelled:
				d, err := idempotent.Decode[contract.OrderCancelledV1](ev)
				if err != nil {
					return err
				}
				ids = append(ids, d.OrderID)
			}
		}
		slices.Sort(ids)
		if err := paymentstore.LockOrders(ctx, tx, slices.Compact(ids)); err != nil {
			return err
		}
		var pending []paymentstore.NewIntent
		flush := func() error {
			_, err := paymentstore.CreateIntents(ctx, tx, pending)
			pending = pending[:0]
			return err
		}
		for i, ev := range evs {
			if in := intents[i]; in != nil {
				pending = append(pending, *in)
				continue
			}
			if err := flush(); err != nil {
				return err
			}
			if err := mux.Handle(ctx, tx, ev, out); err != nil {
				return fmt.Errorf("event %s (%s): %w", ev.EventID, ev.EventType, err)
			}
		}
		return flush()
	}
}
