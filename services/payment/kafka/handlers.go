// Package kafka adapts the saga's events to the payment store. Handlers
// only write rows; the charger makes the provider calls once those rows
// are committed.
package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/services/payment/postgres"
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
// that is or becomes paid gets refunded.
func Handlers() idempotent.Mux {
	return idempotent.Mux{
		"inventory.reserved": func(ctx context.Context, tx pgx.Tx, ev idempotent.Event) error {
			var d reserved
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return idempotent.Permanent(fmt.Errorf("event %s: %w", ev.EventID, err))
			}
			if d.Currency == "" {
				return idempotent.Permanent(fmt.Errorf("event %s (order %s): reservation carries no amount and currency", ev.EventID, d.OrderID))
			}
			if gone, err := postgres.OrderCancelled(ctx, tx, d.OrderID); err != nil || gone {
				return err
			}
			if d.PaymentMethod == "" {
				d.PaymentMethod = DefaultPaymentMethod
			}
			_, _, err := postgres.CreateIntent(ctx, tx, postgres.NewIntent{OrderID: d.OrderID, Amount: d.Amount,
				Currency: d.Currency, CustomerID: d.CustomerID, PaymentMethod: d.PaymentMethod})
			return err
		},
		"order.cancelled": func(ctx context.Context, tx pgx.Tx, ev idempotent.Event) error {
			var d cancelled
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return idempotent.Permanent(fmt.Errorf("event %s: %w", ev.EventID, err))
			}
			_, err := postgres.RecordCancelledOrder(ctx, tx, d.OrderID, d.Reason)
			return err
		},
	}
}

// LockBatch locks the orders whose intent or cancellation the batch
// applies, in id order, before it is applied (see postgres.LockOrders).
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
	return postgres.LockOrders(ctx, tx, slices.Compact(ids))
}
