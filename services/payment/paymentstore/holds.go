package paymentstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment"
)

// Hold is one row of payment_holds: an authorization hold of the
// orchestrated checkout, keyed by its authorize command's idempotency key.
type Hold struct {
	Key               string
	SagaID            string
	OrderID           string
	CustomerID        string
	Amount            int64
	Currency          string
	PaymentMethod     string
	ProviderPaymentID string // empty until the provider named the PaymentIntent
	Status            payment.HoldStatus
	AmountCaptured    int64
	RefundID          string
	FailureReason     string
	ObservedStatus    string
	// Traceparent is the trace of the command that created the hold ("" with
	// tracing off): webhooks about the hold are applied in it. It is
	// stored from that command (HoldCommand.Traceparent), never from Hold.
	Traceparent string
}

const holdCols = `hold_key, saga_id, order_id, customer_id, amount, currency, payment_method, coalesce(provider_payment_id, ''),
	status, coalesce(amount_captured, 0), coalesce(refund_id, ''), coalesce(failure_reason, ''), coalesce(observed_external_status, ''),
	coalesce(traceparent, '')`

func scanHold(row pgx.Row) (Hold, error) {
	var h Hold
	var status string
	err := row.Scan(&h.Key, &h.SagaID, &h.OrderID, &h.CustomerID, &h.Amount, &h.Currency, &h.PaymentMethod,
		&h.ProviderPaymentID, &status, &h.AmountCaptured, &h.RefundID, &h.FailureReason, &h.ObservedStatus, &h.Traceparent)
	h.Status = payment.HoldStatus(status)
	return h, err
}

// HoldByKey reads a hold by its key; found is false when there is none.
func HoldByKey(ctx context.Context, q Querier, key string) (h Hold, found bool, err error) {
	h, err = scanHold(q.QueryRow(ctx, `select `+holdCols+` from payment_holds where hold_key = $1`, key))
	return foundHold(h, err, "key "+key)
}

// HoldByProviderID reads the hold tied to a provider PaymentIntent.
func HoldByProviderID(ctx context.Context, q Querier, providerID string) (h Hold, found bool, err error) {
	h, err = scanHold(q.QueryRow(ctx, `select `+holdCols+` from payment_holds where provider_payment_id = $1`, providerID))
	return foundHold(h, err, "provider id "+providerID)
}

func foundHold(h Hold, err error, what string) (Hold, bool, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return Hold{}, false, nil
	}
	if err != nil {
		return Hold{}, false, fmt.Errorf("read hold with %s: %w", what, err)
	}
	return h, true, nil
}

// HoldCommand is one row of hold_commands: a payment.authorize_hold,
// payment.capture_hold or payment.cancel_hold command, once per
// idempotency key, with the reply it got once answered.
type HoldCommand struct {
	Key           string
	Type          contract.Type
	CommandID     string // event id of the first command received under Key
	CorrelationID string
	SagaID        string
	Step          string
	HoldKey       string // the hold it acts on (its own key for an authorize)
	Amount        int64
	Currency      string
	Attempts      int
	Replied       bool
	Reply         HoldReply // when Replied
	// Traceparent is the trace of the command's consumer span ("" with
	// tracing off): the holder's attempts continue it.
	Traceparent string
}

// HoldReply is what a hold command was answered.
type HoldReply struct {
	Outcome           contract.SagaStepRepliedV1Outcome
	Reason            string
	Retryable         *bool
	Amount            *int64
	ProviderPaymentID string
}

const holdCommandCols = `idempotency_key, command_type, command_id::text, correlation_id, saga_id, step, hold_key, amount, currency,
	attempts, status = 'replied', coalesce(outcome, ''), coalesce(reason, ''), retryable, reply_amount, coalesce(provider_payment_id, ''),
	coalesce(traceparent, '')`

func scanHoldCommand(row pgx.Row) (HoldCommand, error) {
	var c HoldCommand
	var typ, outcome string
	err := row.Scan(&c.Key, &typ, &c.CommandID, &c.CorrelationID, &c.SagaID, &c.Step, &c.HoldKey, &c.Amount, &c.Currency,
		&c.Attempts, &c.Replied, &outcome, &c.Reply.Reason, &c.Reply.Retryable, &c.Reply.Amount, &c.Reply.ProviderPaymentID,
		&c.Traceparent)
	c.Type, c.Reply.Outcome = contract.Type(typ), contract.SagaStepRepliedV1Outcome(outcome)
	return c, err
}

// ReceiveHoldCommand stores a command before anything acts on it; for an
// authorize, newHold is the hold's row, stored with it in the command's
// trace (nil for the others). It is idempotent on the command's key: a repeat stores nothing
// and returns the command as first stored (created false), with its reply
// when it was answered, for the caller to send again.
func ReceiveHoldCommand(ctx context.Context, tx pgx.Tx, c HoldCommand, newHold *Hold) (HoldCommand, bool, error) {
	if newHold != nil {
		if _, err := tx.Exec(ctx, `insert into payment_holds (hold_key, saga_id, order_id, customer_id, amount, currency, payment_method, traceparent)
			values ($1, $2, $3, $4, $5, $6, $7, nullif($8, '')) on conflict (hold_key) do nothing`,
			newHold.Key, newHold.SagaID, newHold.OrderID, newHold.CustomerID, newHold.Amount, newHold.Currency, newHold.PaymentMethod,
			c.Traceparent); err != nil {
			return HoldCommand{}, false, fmt.Errorf("store hold %s: %w", newHold.Key, err)
		}
	}
	tag, err := tx.Exec(ctx, `insert into hold_commands (idempotency_key, command_type, command_id, correlation_id, saga_id, step, hold_key, amount, currency, traceparent)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, nullif($10, '')) on conflict (idempotency_key) do nothing`,
		c.Key, string(c.Type), c.CommandID, c.CorrelationID, c.SagaID, c.Step, c.HoldKey, c.Amount, c.Currency, c.Traceparent)
	if err != nil {
		return HoldCommand{}, false, fmt.Errorf("store %s command %s (key %s): %w", c.Type, c.CommandID, c.Key, err)
	}
	got, err := scanHoldCommand(tx.QueryRow(ctx, `select `+holdCommandCols+` from hold_commands where idempotency_key = $1`, c.Key))
	if err != nil {
		return HoldCommand{}, false, fmt.Errorf("read hold command %s: %w", c.Key, err)
	}
	return got, tag.RowsAffected() == 1, nil
}

// HoldCommandByKey reads a command by its idempotency key.
func HoldCommandByKey(ctx context.Context, q Querier, key string) (HoldCommand, error) {
	c, err := scanHoldCommand(q.QueryRow(ctx, `select `+holdCommandCols+` from hold_commands where idempotency_key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return HoldCommand{}, fmt.Errorf("hold command %s: %w", key, ErrNotFound)
	}
	return c, err
}

// ClaimHoldCommands takes up to limit unanswered commands due for an
// attempt and pushes their next attempt a lease into the future, as
// ClaimCharges does for charges.
//
// Only the oldest unanswered command of each hold is taken: the commands
// of one hold take effect in the order they were received, so a cancel
// waits until the capture before it is answered (it would otherwise
// release the hold under the capture, or race it), however many workers
// claim. Order wins over progress: a command left pending holds back the
// ones behind it.
func ClaimHoldCommands(ctx context.Context, pool *pgxpool.Pool, limit int, lease time.Duration) ([]HoldCommand, error) {
	rows, err := pool.Query(ctx, `update hold_commands c set next_attempt_at = now() + make_interval(secs => $2), attempts = c.attempts + 1
		from (select idempotency_key from hold_commands h where status = 'pending' and next_attempt_at <= now()
		        and not exists (select 1 from hold_commands earlier where earlier.hold_key = h.hold_key
		                        and earlier.status = 'pending' and earlier.seq < h.seq)
		      order by next_attempt_at limit $1 for update skip locked) due
		where c.idempotency_key = due.idempotency_key
		returning c.idempotency_key, c.command_type, c.command_id::text, c.correlation_id, c.saga_id, c.step, c.hold_key, c.amount,
			c.currency, c.attempts, c.status = 'replied', coalesce(c.outcome, ''), coalesce(c.reason, ''), c.retryable, c.reply_amount,
			coalesce(c.provider_payment_id, ''), coalesce(c.traceparent, '')`, limit, lease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("claim due hold commands: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (HoldCommand, error) { return scanHoldCommand(r) })
	if err != nil {
		return nil, fmt.Errorf("claim due hold commands: %w", err)
	}
	return out, nil
}

// RetryHoldCommandAt records why an attempt left a command unanswered and
// when to try again.
//
// A zero time parks it until an operator acts.
func RetryHoldCommandAt(ctx context.Context, q Execer, key string, at time.Time, lastErr string) error {
	var next any = at
	if at.IsZero() {
		next = "infinity"
	}
	_, err := q.Exec(ctx, `update hold_commands set next_attempt_at = $2::timestamptz, last_error = nullif($3, '') where idempotency_key = $1 and status = 'pending'`,
		key, next, lastErr)
	if err != nil {
		return fmt.Errorf("hold command %s: schedule retry: %w", key, err)
	}
	return nil
}

// HoldChange is what the provider (or a webhook) said about a hold. Zero
// fields change nothing.
type HoldChange struct {
	To                payment.HoldStatus // applied only if payment.HoldMoves allows it
	ProviderPaymentID string
	AmountCaptured    int64
	RefundID          string
	FailureReason     string
	Observed          string // the provider's status
}

// changeHold applies ch to the hold with key under its row lock. It
// returns the hold after the change and whether its status moved. A hold
// tied to another provider payment is ErrProviderMismatch. A missing hold
// with To void is created void (a compensation that came first), in c's
// trace.
func changeHold(ctx context.Context, tx pgx.Tx, key string, c HoldCommand, ch HoldChange) (Hold, bool, error) {
	if ch.To == payment.HoldVoid {
		if _, err := tx.Exec(ctx, `insert into payment_holds (hold_key, saga_id, order_id, amount, currency, status, traceparent)
			values ($1, $2, '', 0, $3, 'void', nullif($4, '')) on conflict (hold_key) do nothing`, key, c.SagaID, c.Currency, c.Traceparent); err != nil {
			return Hold{}, false, fmt.Errorf("void hold %s: %w", key, err)
		}
	}
	h, err := scanHold(tx.QueryRow(ctx, `select `+holdCols+` from payment_holds where hold_key = $1 for update`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return Hold{}, false, nil
	}
	if err != nil {
		return Hold{}, false, fmt.Errorf("lock hold %s: %w", key, err)
	}
	if ch.ProviderPaymentID != "" && h.ProviderPaymentID != "" && h.ProviderPaymentID != ch.ProviderPaymentID {
		return h, false, fmt.Errorf("hold %s is %s, the provider says %s: %w", key, h.ProviderPaymentID, ch.ProviderPaymentID, ErrProviderMismatch)
	}
	moved := ch.To != "" && ch.To != h.Status && payment.HoldMoves(h.Status, ch.To)
	if moved {
		h.Status = ch.To
	}
	if h.ProviderPaymentID == "" {
		h.ProviderPaymentID = ch.ProviderPaymentID
	}
	if moved && ch.AmountCaptured > 0 && (ch.To == payment.HoldCaptured || ch.To == payment.HoldRefunded && h.AmountCaptured == 0) {
		h.AmountCaptured = ch.AmountCaptured
	}
	if ch.RefundID != "" {
		h.RefundID = ch.RefundID
	}
	if moved && ch.FailureReason != "" {
		h.FailureReason = ch.FailureReason
	}
	if ch.Observed != "" {
		h.ObservedStatus = ch.Observed
	}
	_, err = tx.Exec(ctx, `update payment_holds set status = $2, provider_payment_id = nullif($3, ''), amount_captured = nullif($4, 0),
		refund_id = nullif($5, ''), failure_reason = nullif($6, ''), observed_external_status = nullif($7, ''), updated_at = now()
		where hold_key = $1`, key, string(h.Status), h.ProviderPaymentID, h.AmountCaptured, h.RefundID, h.FailureReason, h.ObservedStatus)
	if err != nil {
		return Hold{}, false, fmt.Errorf("update hold %s: %w", key, err)
	}
	return h, moved, nil
}

// AttachHoldProvider stores the provider's PaymentIntent id on a hold as
// soon as it is known, before the outcome is settled, so a later attempt
// reads the PaymentIntent instead of asking for a new one.
func AttachHoldProvider(ctx context.Context, pool *pgxpool.Pool, key, providerID string) error {
	if providerID == "" {
		return nil
	}
	if _, err := pool.Exec(ctx, `update payment_holds set provider_payment_id = $2, updated_at = now()
		where hold_key = $1 and provider_payment_id is null`, key, providerID); err != nil {
		return fmt.Errorf("hold %s: attach provider payment %s: %w", key, providerID, err)
	}
	return nil
}

// SettleHoldCommand records an answered command in one transaction: the
// hold's change (ch), the command's reply, and the saga.step_replied event
// through the outbox, so the reply exists if and only if the effect is
// recorded. A command already answered (by a concurrent attempt) is left
// as it is and replied=false.
func SettleHoldCommand(ctx context.Context, pool *pgxpool.Pool, w outbox.Writer, c HoldCommand, ch HoldChange, r HoldReply) (replied bool, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, _, err := changeHold(ctx, tx, c.HoldKey, c, ch); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `update hold_commands set status = 'replied', outcome = $2, reason = nullif($3, ''), retryable = $4,
			reply_amount = $5, provider_payment_id = nullif($6, ''), replied_at = now(), last_error = null
			where idempotency_key = $1 and status = 'pending'`,
			c.Key, string(r.Outcome), r.Reason, r.Retryable, r.Amount, r.ProviderPaymentID)
		if err != nil {
			return fmt.Errorf("hold command %s: record reply: %w", c.Key, err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		c.Replied, c.Reply = true, r
		if _, err := w.Append(ctx, tx, outbox.Event{Payload: ReplyOf(c), CorrelationID: c.CorrelationID, CausationID: c.CommandID}); err != nil {
			return fmt.Errorf("hold command %s: append reply: %w", c.Key, err)
		}
		replied = true
		return nil
	})
	return replied, err
}

// ObservedHold reads the hold a webhook is about: the one tied to the
// provider PaymentIntent providerID, or else the one whose key the
// intent's metadata names (holdKey; our first call's answer may have been
// lost before we stored the provider's id). found is false when neither
// names a hold.
func ObservedHold(ctx context.Context, q Querier, providerID, holdKey string) (h Hold, found bool, err error) {
	h, err = scanHold(q.QueryRow(ctx, `select `+holdCols+` from payment_holds where provider_payment_id = $1 or hold_key = $2
		order by provider_payment_id = $1 desc nulls last limit 1`, providerID, holdKey))
	return foundHold(h, err, "provider id "+providerID+" or key "+holdKey)
}

// ObserveHold applies what a webhook says about the hold with key (found
// by ObservedHold) under its row lock; moved reports whether its status
// moved.
func ObserveHold(ctx context.Context, tx pgx.Tx, key string, ch HoldChange) (moved bool, err error) {
	_, moved, err = changeHold(ctx, tx, key, HoldCommand{}, ch)
	return moved, err
}

// ReplyOf is the saga.step_replied event of an answered command.
func ReplyOf(c HoldCommand) contract.SagaStepRepliedV1 {
	return contract.SagaStepRepliedV1{SagaID: c.SagaID, Step: c.Step, CommandType: contract.SagaStepRepliedV1CommandType(c.Type),
		CommandID: c.CommandID, IdempotencyKey: c.Key, Outcome: c.Reply.Outcome, Reason: c.Reply.Reason,
		Retryable: c.Reply.Retryable, ProviderPaymentID: c.Reply.ProviderPaymentID, Amount: c.Reply.Amount}
}
