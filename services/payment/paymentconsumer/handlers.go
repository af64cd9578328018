// Package paymentconsumer adapts the saga's events to the payment store. Handlers
// only write rows; the charger makes the provider calls once those rows
// are committed.
package paymentconsumer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/services/internal/sagaevent"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

// Topics the payment service consumes (before any prefix).
var Topics = []string{"inventory-events", "order-events"}

type reserved struct {
	OrderID       string `json:"order_id"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	CustomerID    string `json:"customer_id"`
	PaymentMethod string `json:"payment_method"`
}

type cancelled struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// DefaultPaymentMethod is charged when a reservation names none.
const DefaultPaymentMethod = "pm_card_visa"

// Handlers: inventory.reserved stores the payment intent (unless the order
// was already cancelled); order.cancelled marks the order so a payment
// that is or becomes paid gets refunded. BatchHandler applies the same
// handlers with the intents of a batch written together.
func Handlers() idempotent.Mux {
	return idempotent.Mux{
		"inventory.reserved": func(ctx context.Context, tx pgx.Tx, ev idempotent.Event) error {
			in, err := intentOf(ev)
			if err != nil {
				return err
			}
			_, err = paymentstore.CreateIntents(ctx, tx, []paymentstore.NewIntent{in})
			return err
		},
		"order.cancelled": func(ctx context.Context, tx pgx.Tx, ev idempotent.Event) error {
			var d cancelled
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return idempotent.Permanent(fmt.Errorf("event %s: %w", ev.EventID, err))
			}
			_, err := paymentstore.RecordCancelledOrder(ctx, tx, d.OrderID, d.Reason)
			return err
		},
	}
}

// intentOf reads the intent a reservation asks for; a reservation that
// cannot be read is a permanent failure of that event.
func intentOf(ev idempotent.Event) (paymentstore.NewIntent, error) {
	var d reserved
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return paymentstore.NewIntent{}, idempotent.Permanent(fmt.Errorf("event %s: %w", ev.EventID, err))
	}
	if d.Currency == "" {
		return paymentstore.NewIntent{}, idempotent.Permanent(fmt.Errorf("event %s (order %s): reservation carries no amount and currency", ev.EventID, d.OrderID))
	}
	if d.PaymentMethod == "" {
		d.PaymentMethod = DefaultPaymentMethod
	}
	return paymentstore.NewIntent{OrderID: d.OrderID, Amount: d.Amount, Currency: d.Currency, CustomerID: d.CustomerID,
		PaymentMethod: d.PaymentMethod}, nil
}

// BatchHandler applies a consumer batch with mux (Handlers plus whatever
// else the service consumes), in offset order, except that consecutive
// reservations are stored with one CreateIntents. Pending intents are
// written before any other handled event, so a cancellation later in
// the batch still finds the intent it must mark. The orders of the batch
// are locked first (LockBatch) and appended events are buffered
// (sagaevent.WithBuffer) and written at the end.
func BatchHandler(mux idempotent.Mux) idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error {
		if err := LockBatch(ctx, tx, evs); err != nil {
			return err
		}
		ctx, buf := sagaevent.WithBuffer(ctx)
		var intents []paymentstore.NewIntent
		flush := func() error {
			_, err := paymentstore.CreateIntents(ctx, tx, intents)
			intents = intents[:0]
			return err
		}
		for _, ev := range evs {
			if ev.EventType == "inventory.reserved" {
				in, err := intentOf(ev)
				if err != nil {
					return err // it names the event
				}
				intents = append(intents, in)
				continue
			}
			h, ok := mux[ev.EventType]
			if !ok {
				continue // not ours: nothing read or written
			}
			if err := flush(); err != nil {
				return err
			}
			if err := h(ctx, tx, ev); err != nil {
				return fmt.Errorf("event %s (%s): %w", ev.EventID, ev.EventType, err)
			}
		}
		if err := flush(); err != nil {
			return err
		}
		return buf.Flush(ctx, tx)
	}
}

// LockBatch locks the orders whose intent or cancellation the batch
// applies, in id order, before it is applied (see paymentstore.LockOrders).
func LockBatch(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error {
	var ids []string
	for _, ev := range evs {
		if ev.EventType != "inventory.reserved" && ev.EventType != "order.cancelled" {
			continue
		}
		var d cancelled
		if json.Unmarshal(ev.Data, &d) == nil && d.OrderID != "" {
			ids = append(ids, d.OrderID)
		}
	}
	slices.Sort(ids)
	return paymentstore.LockOrders(ctx, tx, slices.Compact(ids))
}
