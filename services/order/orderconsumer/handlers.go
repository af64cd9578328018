// Package orderconsumer adapts the saga's events to the order store: which events
// the order service consumes and what each does to an order.
package orderconsumer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/services/internal/sagaevent"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/order/orderstore"
)

// Topics the order service consumes (before any prefix).
var Topics = []string{"inventory-events", "payment-events"}

type orderRef struct {
	OrderID string `json:"order_id"`
	Reason  string `json:"reason"`
}

// signals maps each consumed event type to the order signal it carries
// and the cancellation reason it gives.
var signals = map[string]struct {
	sig    order.Signal
	reason func(orderRef) string
}{
	"inventory.reserved": {order.InventoryReserved, func(orderRef) string { return "" }},
	"inventory.rejected": {order.InventoryRejected, func(orderRef) string { return order.ReasonOutOfStock }},
	"inventory.released": {order.InventoryReleased, func(d orderRef) string {
		if d.Reason == "" || d.Reason == "order_cancelled" {
			return "cancelled"
		}
		return d.Reason
	}},
	"payment.processed": {order.PaymentProcessed, func(orderRef) string { return "" }},
}

// decode reads the signal ev carries; ok is false for event types the
// order service does not consume. A payload that is not JSON or names no
// valid order id is a permanent error of that event: it is dead-lettered.
func decode(ev idempotent.Event) (s orderstore.Signal, ok bool, err error) {
	h, ok := signals[ev.EventType]
	if !ok {
		return s, false, nil
	}
	var d orderRef
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		return s, false, idempotent.Permanent(fmt.Errorf("event %s (%s): %w", ev.EventID, ev.EventType, err))
	}
	if err := uuid.Validate(d.OrderID); err != nil {
		return s, false, idempotent.Permanent(fmt.Errorf("event %s (%s): order id %q: %w", ev.EventID, ev.EventType, d.OrderID, err))
	}
	return orderstore.Signal{OrderID: d.OrderID, Signal: h.sig, Reason: h.reason(d), EventID: ev.EventID}, true, nil
}

// BatchHandler applies a consumer batch with one orderstore.ApplyBatch call
// (two round trips however many events) and writes the events it appends
// with one COPY. Events of types the service does not consume are skipped,
// as Handlers' Mux does; signals for orders this deployment does not have
// (another deployment on the same topics) change nothing and are not worth
// a dead letter. When the runner redoes a failed batch one event at a time,
// each call decides and buffers on its own.
func BatchHandler() idempotent.BatchHandler {
	return func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event) error {
		sigs := make([]orderstore.Signal, 0, len(evs))
		for _, ev := range evs {
			s, ok, err := decode(ev)
			if err != nil {
				return err
			}
			if ok {
				sigs = append(sigs, s)
			}
		}
		if len(sigs) == 0 {
			return nil
		}
		ctx, buf := sagaevent.WithBuffer(ctx)
		if _, err := orderstore.ApplyBatch(ctx, tx, sigs); err != nil {
			return err
		}
		return buf.Flush(ctx, tx)
	}
}

// Handlers maps each consumed event type to a handler that applies its
// signal alone, for a runner with a per-event Handler. The service itself
// runs BatchHandler, which gives the same outcome for a whole batch.
func Handlers() idempotent.Mux {
	mux := make(idempotent.Mux, len(signals))
	for typ := range signals {
		mux[typ] = func(ctx context.Context, tx pgx.Tx, ev idempotent.Event) error {
			s, _, err := decode(ev)
			if err != nil {
				return err
			}
			_, err = orderstore.ApplyBatch(ctx, tx, []orderstore.Signal{s})
			return err
		}
	}
	return mux
}
