package paymentconsumer

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

// HoldTypes are the orchestrator's commands to the payment service, on
// HoldTopic (see RegisterHolds).
var HoldTypes = []contract.Type{contract.TypePaymentAuthorizeHold, contract.TypePaymentCaptureHold, contract.TypePaymentCancelHold}

// HoldTopic is where the orchestrator sends them (before any prefix).
var HoldTopic = contract.TypePaymentAuthorizeHold.Topic()

// RegisterHolds adds the hold commands' handlers to mux. A handler only
// stores the command (and, for an authorize, the hold's row) in the
// consumer's transaction; the holder calls the provider once that is
// committed and replies. A command whose key was seen before is not stored
// again: if it was answered, the same reply is sent again (the orchestrator
// may have missed it); if not, the reply is still to come.
func RegisterHolds(mux *idempotent.Mux) {
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.PaymentAuthorizeHoldV1, out outbox.Emitter) error {
		method := d.PaymentMethod
		if method == "" {
			method = DefaultPaymentMethod
		}
		c := command(ev, contract.TypePaymentAuthorizeHold, d.IdempotencyKey, d.SagaID, d.Step, d.IdempotencyKey, d.Amount, d.Currency)
		h := &paymentstore.Hold{Key: d.IdempotencyKey, SagaID: d.SagaID, OrderID: d.OrderID, CustomerID: d.CustomerID,
			Amount: d.Amount, Currency: d.Currency, PaymentMethod: method}
		return receive(ctx, tx, ev, c, h, out)
	})
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.PaymentCaptureHoldV1, out outbox.Emitter) error {
		c := command(ev, contract.TypePaymentCaptureHold, d.IdempotencyKey, d.SagaID, d.Step, d.HoldKey, d.Amount, d.Currency)
		return receive(ctx, tx, ev, c, nil, out)
	})
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.PaymentCancelHoldV1, out outbox.Emitter) error {
		c := command(ev, contract.TypePaymentCancelHold, d.IdempotencyKey, d.SagaID, d.Step, d.HoldKey, d.Amount, d.Currency)
		return receive(ctx, tx, ev, c, nil, out)
	})
}

func command(ev idempotent.Event, typ contract.Type, key, saga, step, holdKey string, amount int64, currency string) paymentstore.HoldCommand {
	return paymentstore.HoldCommand{Key: key, Type: typ, CommandID: ev.EventID, CorrelationID: ev.CorrelationID,
		SagaID: saga, Step: step, HoldKey: holdKey, Amount: amount, Currency: currency}
}

func receive(ctx context.Context, tx pgx.Tx, ev idempotent.Event, c paymentstore.HoldCommand, h *paymentstore.Hold, out outbox.Emitter) error {
	c.Traceparent = kit.Traceparent(ctx) // the holder's attempts continue the command's trace
	if c.Key == "" || c.HoldKey == "" {
		return idempotent.Permanent(fmt.Errorf("event %s (%s, saga %s): no idempotency or hold key", ev.EventID, c.Type, c.SagaID))
	}
	got, created, err := paymentstore.ReceiveHoldCommand(ctx, tx, c, h)
	if err != nil || created || !got.Replied {
		return err
	}
	if got.Type != c.Type {
		return idempotent.Permanent(fmt.Errorf("event %s: key %s was first used by a %s command, now by %s", ev.EventID, c.Key, got.Type, c.Type))
	}
	_, err = out.Emit(outbox.CausedBy(ev.Envelope, paymentstore.ReplyOf(got)))
	return err
}
