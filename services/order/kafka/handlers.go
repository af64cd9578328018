// Package kafka adapts the saga's events to the order store: which events
// the order service consumes and what each does to an order.
package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/order/postgres"
)

// Topics the order service consumes (before any prefix).
var Topics = []string{"inventory-events", "payment-events"}

type orderRef struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// Handlers maps each consumed event type to its order signal.
func Handlers() idempotent.Mux {
	h := func(sig order.Signal, reason func(orderRef) string) idempotent.Handler {
		return func(ctx context.Context, tx pgx.Tx, ev idempotent.Event) error {
			var d orderRef
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return idempotent.Permanent(fmt.Errorf("event %s: %w", ev.EventID, err))
			}
			_, err := postgres.Apply(ctx, tx, d.OrderID, sig, reason(d), ev.EventID)
			if errors.Is(err, postgres.ErrNotFound) {
				// Not one of ours (another deployment on the same topics);
				// nothing to do, and not worth a dead letter.
				return nil
			}
			return err
		}
	}
	fixed := func(r string) func(orderRef) string { return func(orderRef) string { return r } }
	return idempotent.Mux{
		"inventory.reserved": h(order.InventoryReserved, fixed("")),
		"inventory.rejected": h(order.InventoryRejected, fixed(order.ReasonOutOfStock)),
		"inventory.released": h(order.InventoryReleased, func(d orderRef) string {
			if d.Reason == "" || d.Reason == "order_cancelled" {
				return "cancelled"
			}
			return d.Reason
		}),
		"payment.processed": h(order.PaymentProcessed, fixed("")),
	}
}

// LockBatch locks the orders a batch's events name, in id order, before
// they are applied (see postgres.LockOrders).
func LockBatch(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error {
	ids := make([]string, 0, len(evs))
	for _, ev := range evs {
		var d orderRef
		if json.Unmarshal(ev.Data, &d) == nil && uuid.Validate(d.OrderID) == nil {
			ids = append(ids, d.OrderID)
		}
	}
	slices.Sort(ids)
	return postgres.LockOrders(ctx, tx, slices.Compact(ids))
}
