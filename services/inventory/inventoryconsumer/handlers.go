// Package inventoryconsumer adapts the saga's events to the inventory store.
package inventoryconsumer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/services/internal/sagaevent"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

// Topics the inventory service consumes (before any prefix).
var Topics = []string{"order-events", "payment-events"}

type orderCreated struct {
	OrderID       string           `json:"order_id"`
	CustomerID    string           `json:"customer_id"`
	Items         []inventory.Line `json:"items"`
	TotalAmount   int64            `json:"total_amount"`
	Currency      string           `json:"currency"`
	PaymentMethod string           `json:"payment_method"`
}

type orderRef struct {
	OrderID string `json:"order_id"`
}

func decode(ev idempotent.Event, v any) error {
	if err := json.Unmarshal(ev.Data, v); err != nil {
		return idempotent.Permanent(fmt.Errorf("event %s: %w", ev.EventID, err))
	}
	return nil
}

// Handlers: order.created reserves; payment.processed commits;
// payment.failed and order.cancelled release.
func Handlers() idempotent.Mux {
	apply := func(a inventory.Action, reason string) idempotent.Handler {
		return func(ctx context.Context, tx pgx.Tx, ev idempotent.Event) error {
			var d orderRef
			if err := decode(ev, &d); err != nil {
				return err
			}
			_, err := inventorystore.Apply(ctx, tx, d.OrderID, a, reason, ev.EventID)
			return err
		}
	}
	return idempotent.Mux{
		"order.created": func(ctx context.Context, tx pgx.Tx, ev idempotent.Event) error {
			var d orderCreated
			if err := decode(ev, &d); err != nil {
				return err
			}
			_, err := inventorystore.Reserve(ctx, tx, inventorystore.ReserveRequest{OrderID: d.OrderID, Lines: d.Items,
				Amount: d.TotalAmount, Currency: d.Currency, CustomerID: d.CustomerID, PaymentMethod: d.PaymentMethod,
				CausationID: ev.EventID})
			return err
		},
		"payment.processed": apply(inventory.Commit, ""),
		"payment.failed":    apply(inventory.Release, inventorystore.ReasonPaymentDeclined),
		"order.cancelled":   apply(inventory.Release, inventorystore.ReasonOrderCancelled),
	}
}

// BatchHandler applies a consumer batch with one inventorystore.ApplyBatch call
// (a fixed handful of round trips however many events) and writes the
// events it appends with one COPY. Events of other types are ignored, as
// Handlers does. When the runner redoes a failed batch one event at a
// time, each call decides and buffers on its own.
func BatchHandler() idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error {
		ops := make([]inventorystore.Op, 0, len(evs))
		for _, ev := range evs {
			var a inventory.Action
			var reason string
			switch ev.EventType {
			case "order.created":
				var d orderCreated
				if err := decode(ev, &d); err != nil {
					return err
				}
				ops = append(ops, inventorystore.Op{Reserve: &inventorystore.ReserveRequest{OrderID: d.OrderID, Lines: d.Items,
					Amount: d.TotalAmount, Currency: d.Currency, CustomerID: d.CustomerID, PaymentMethod: d.PaymentMethod,
					CausationID: ev.EventID}})
				continue
			case "payment.processed":
				a = inventory.Commit
			case "payment.failed":
				a, reason = inventory.Release, inventorystore.ReasonPaymentDeclined
			case "order.cancelled":
				a, reason = inventory.Release, inventorystore.ReasonOrderCancelled
			default:
				continue
			}
			var d orderRef
			if err := decode(ev, &d); err != nil {
				return err
			}
			ops = append(ops, inventorystore.Op{OrderID: d.OrderID, Action: a, Reason: reason, CausationID: ev.EventID})
		}
		if len(ops) == 0 {
			return nil
		}
		ctx, buf := sagaevent.WithBuffer(ctx)
		if _, err := inventorystore.ApplyBatch(ctx, tx, ops); err != nil {
			return err
		}
		return buf.Flush(ctx, tx)
	}
}
