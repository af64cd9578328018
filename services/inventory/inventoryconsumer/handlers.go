// Package inventoryconsumer adapts the saga's events to the inventory store.
package inventoryconsumer

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/inventory"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

// Topics the inventory service consumes (before any prefix).
var Topics = []string{contract.TypeOrderCreated.Topic(), contract.TypePaymentProcessed.Topic(),
	contract.TypeInventoryReserveStock.Topic(), contract.TypeSagaFinished.Topic()}

// Types the inventory service acts on. Choreographed: order.created
// reserves; payment.processed commits; payment.failed and order.cancelled
// release; order.confirmed notes the confirmation, after which the
// order's stock is never released. Each choreographed event but
// order.created is checked against the order's reservation first
// (inventory.Check). Orchestrated: inventory.reserve_stock reserves and
// inventory.release_stock releases, each answered with saga.step_replied;
// saga.finished COMPLETED commits.
var Types = []contract.Type{contract.TypeOrderCreated, contract.TypeOrderConfirmed, contract.TypePaymentProcessed,
	contract.TypePaymentFailed, contract.TypeOrderCancelled,
	contract.TypeInventoryReserveStock, contract.TypeInventoryReleaseStock, contract.TypeSagaFinished}

// opOf reads the store operation ev asks for; ok is false for types the
// service does not act on. An event that cannot be decoded is a permanent
// failure of that event.
func opOf(ev idempotent.Event) (op inventorystore.Op, ok bool, err error) {
	var orderID string
	var check inventory.Event
	switch ev.Type() {
	case contract.TypeOrderCreated:
		d, err := idempotent.Decode[contract.OrderCreatedV3](ev)
		if err != nil {
			return op, false, err
		}
		lines := make([]inventory.Line, len(d.Items))
		for i, it := range d.Items {
			lines[i] = inventory.Line{SKU: it.SKU, Quantity: it.Quantity}
		}
		return inventorystore.Op{Reserve: &inventorystore.ReserveRequest{OrderID: d.OrderID, Lines: lines,
			Amount: d.TotalAmount, Currency: d.Currency, CustomerID: d.CustomerID, PaymentMethod: d.PaymentMethod,
			CausationID: ev.EventID}}, true, nil
	case contract.TypePaymentProcessed:
		d, err := idempotent.Decode[contract.PaymentProcessedV1](ev)
		if err != nil {
			return op, false, err
		}
		orderID, op.Action, check = d.OrderID, inventory.Commit, inventory.PaymentProcessed
	case contract.TypePaymentFailed:
		d, err := idempotent.Decode[contract.PaymentFailedV1](ev)
		if err != nil {
			return op, false, err
		}
		orderID, op.Action, op.Reason, check = d.OrderID, inventory.Release, inventorystore.ReasonPaymentDeclined, inventory.PaymentFailed
	case contract.TypeOrderCancelled:
		d, err := idempotent.Decode[contract.OrderCancelledV1](ev)
		if err != nil {
			return op, false, err
		}
		orderID, op.Action, op.Reason, check = d.OrderID, inventory.Release, inventorystore.ReasonOrderCancelled, inventory.OrderCancelled
	case contract.TypeOrderConfirmed:
		d, err := idempotent.Decode[contract.OrderConfirmedV1](ev)
		if err != nil {
			return op, false, err
		}
		orderID, check = d.OrderID, inventory.OrderConfirmed
	case contract.TypeInventoryReserveStock:
		d, err := idempotent.Decode[contract.InventoryReserveStockV1](ev)
		if err != nil {
			return op, false, err
		}
		lines := make([]inventory.Line, len(d.Items))
		for i, it := range d.Items {
			lines[i] = inventory.Line(it)
		}
		return inventorystore.Op{Reserve: &inventorystore.ReserveRequest{OrderID: d.OrderID, Lines: lines, CausationID: ev.EventID},
			CausationID: ev.EventID, Command: sagaCommand(ev, d.SagaID, d.Step, d.IdempotencyKey)}, true, nil
	case contract.TypeInventoryReleaseStock:
		d, err := idempotent.Decode[contract.InventoryReleaseStockV1](ev)
		if err != nil {
			return op, false, err
		}
		orderID, op.Action, op.Reason = d.OrderID, inventory.Release, inventorystore.ReasonSagaCompensated
		op.Command = sagaCommand(ev, d.SagaID, d.Step, d.IdempotencyKey)
	case contract.TypeSagaFinished:
		d, err := idempotent.Decode[contract.SagaFinishedV1](ev)
		if err != nil {
			return op, false, err
		}
		if d.Status != contract.SagaFinishedV1StatusCOMPLETED {
			return op, false, nil // compensation released the stock
		}
		orderID, op.Action = d.OrderID, inventory.Commit
	default:
		return op, false, nil
	}
	op.OrderID, op.CausationID = orderID, ev.EventID
	if check != "" {
		op.Check, op.Data = check, ev.Data
	}
	return op, true, nil
}

// BatchHandler applies a consumer batch with one inventorystore.ApplyBatch
// call (a fixed handful of round trips however many events); the runner
// writes the events it emits with one COPY. Events of other types are
// ignored.
func BatchHandler() idempotent.BatchHandler {
	return idempotent.Collect(opOf, func(ctx context.Context, tx pgx.Tx, out outbox.Emitter, ops []inventorystore.Op) error {
		_, err := inventorystore.ApplyBatch(ctx, tx, out, ops)
		return err
	})
}

func sagaCommand(ev idempotent.Event, sagaID, step, key string) *inventorystore.SagaCommand {
	return &inventorystore.SagaCommand{SagaID: sagaID, Step: step, Key: key, Type: ev.Type(), ID: ev.EventID}
}
