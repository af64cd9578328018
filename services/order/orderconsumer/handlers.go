// Package orderconsumer adapts the saga's events to the order store: which events
// the order service consumes and what each does to an order.
package orderconsumer

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/order/orderstore"
)

// Topics the order service consumes (before any prefix).
var Topics = []string{contract.TypeInventoryReserved.Topic(), contract.TypePaymentProcessed.Topic(), contract.TypeSagaFinished.Topic()}

// Types the order service acts on; the runner acknowledges the others of
// its topics without a transaction.
var Types = []contract.Type{contract.TypeInventoryReserved, contract.TypeInventoryRejected,
	contract.TypeInventoryReleased, contract.TypePaymentProcessed, contract.TypeSagaFinished}

// signalOf reads the signal ev carries; ok is false for event types the
// order service does not consume. A payload that cannot be decoded or
// names no valid order id is a permanent error of that event: it is
// dead-lettered.
func signalOf(ev idempotent.Event) (s orderstore.Signal, ok bool, err error) {
	var orderID, reason string
	var sig order.Signal
	switch ev.Type() {
	case contract.TypeInventoryReserved:
		d, err := idempotent.Decode[contract.InventoryReservedV2](ev)
		if err != nil {
			return s, false, err
		}
		orderID, sig = d.OrderID, order.InventoryReserved
	case contract.TypeInventoryRejected:
		d, err := idempotent.Decode[contract.InventoryRejectedV1](ev)
		if err != nil {
			return s, false, err
		}
		orderID, sig, reason = d.OrderID, order.InventoryRejected, order.ReasonOutOfStock
	case contract.TypeInventoryReleased:
		d, err := idempotent.Decode[contract.InventoryReleasedV1](ev)
		if err != nil {
			return s, false, err
		}
		orderID, sig, reason = d.OrderID, order.InventoryReleased, d.Reason
		if reason == "" || reason == "order_cancelled" {
			reason = "cancelled"
		}
	case contract.TypePaymentProcessed:
		d, err := idempotent.Decode[contract.PaymentProcessedV1](ev)
		if err != nil {
			return s, false, err
		}
		orderID, sig = d.OrderID, order.PaymentProcessed
	case contract.TypeSagaFinished:
		d, err := idempotent.Decode[contract.SagaFinishedV1](ev)
		if err != nil {
			return s, false, err
		}
		orderID, sig, reason = sagaOutcome(d)
	default:
		return s, false, nil
	}
	if err := uuid.Validate(orderID); err != nil {
		return s, false, idempotent.Permanent(fmt.Errorf("event %s (%s): order id %q: %w", ev.EventID, ev.EventType, orderID, err))
	}
	return orderstore.Signal{OrderID: orderID, Signal: sig, Reason: reason, EventID: ev.EventID}, true, nil
}

// BatchHandler applies a consumer batch with one orderstore.ApplyBatch call
// (two round trips however many events); the events it emits are written
// by the runner with one COPY. Events of types the service does not
// consume are skipped; signals for orders this deployment does not have
// (another deployment on the same topics) change nothing and are not worth
// a dead letter.
func BatchHandler() idempotent.BatchHandler {
	return idempotent.Collect(signalOf, func(ctx context.Context, tx pgx.Tx, out outbox.Emitter, sigs []orderstore.Signal) error {
		_, err := orderstore.ApplyBatch(ctx, tx, out, sigs)
		return err
	})
}

// sagaOutcome is the signal and cancellation reason of an orchestrated
// checkout's outcome: a cancelled order says which step failed, or that
// its compensation needs a person (the orchestrator's review entry).
func sagaOutcome(d contract.SagaFinishedV1) (orderID string, sig order.Signal, reason string) {
	switch d.Status {
	case contract.SagaFinishedV1StatusCOMPLETED:
		return d.OrderID, order.SagaCompleted, ""
	case contract.SagaFinishedV1StatusFAILED:
		return d.OrderID, order.SagaFailed, "compensation_failed"
	default:
		reason = "saga_compensated"
		if d.FailedStep != "" {
			reason = d.FailedStep + "_failed"
		}
		return d.OrderID, order.SagaCompensated, reason
	}
}
