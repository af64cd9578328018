// Package repair is the payment-commands handler payment-svc runs: it
// applies the reconciler's repair commands (payment.apply_succeeded,
// payment.apply_canceled) through the payment service's canonical writer and
// resolves the finding each command came from, in the consumer's
// transaction.
//
// The idempotent runner already skips a command it has processed; the
// handler is idempotent on its own as well, because the same drift can also
// be healed by the live webhook first: the writer is status-guarded, and a
// command whose transition is already done still resolves its finding
// (already_applied) instead of failing or applying twice.
package repair

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

// Topic is where the reconciler's commands are published.
const Topic = "payment-commands"

// ResolvedBy is recorded on findings the handler resolves.
const ResolvedBy = "payment-svc"

// ErrProviderMismatch: the command names another provider payment than the
// payment row holds; applying it could mark the wrong charge. The command is
// dead-lettered for an operator.
var ErrProviderMismatch = errors.New("repair: command names another provider payment than the payment row")

// Types are the repair commands Register handles.
var Types = []contract.Type{contract.TypePaymentApplySucceeded, contract.TypePaymentApplyCanceled}

// Register adds the handlers of the repair commands to the consuming
// service's mux; the transitions they make emit their events through
// events (the service's outbox writer, with its topic prefix).
func Register(mux *idempotent.Mux, events outbox.Writer) {
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.PaymentApplySucceededV1, _ outbox.Emitter) error {
		return ApplySucceeded(ctx, tx, events, ev, d)
	})
	idempotent.Handle(mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.PaymentApplyCanceledV1, _ outbox.Emitter) error {
		return ApplyCanceled(ctx, tx, events, ev, d)
	})
}

// ApplySucceeded moves the payment to paid through the canonical writer
// (which emits payment.processed in tx) and resolves the finding.
func ApplySucceeded(ctx context.Context, tx pgx.Tx, events outbox.Writer, ev idempotent.Event, d contract.PaymentApplySucceededV1) error {
	c := reconciler.RepairCommandData{PaymentID: d.PaymentID, OrderID: d.OrderID, ProviderPaymentID: d.ProviderPaymentID,
		FindingID: d.FindingID, Kind: reconciler.Kind(d.Kind), ExpectedLocalStatus: string(d.ExpectedLocalStatus),
		ObservedProviderStatus: string(d.ObservedProviderStatus), DetectedAt: d.DetectedAt}
	return apply(ctx, tx, ev, c, payment.StatusPaid, func(id int64, c reconciler.RepairCommandData, source string) (bool, error) {
		return paymentstore.MarkPaid(ctx, tx, events, id, c.ObservedProviderStatus, source)
	})
}

// ApplyCanceled moves the pending payment to failed through the canonical
// writer (which emits payment.failed in tx, cancelling the order) and
// resolves the finding.
func ApplyCanceled(ctx context.Context, tx pgx.Tx, events outbox.Writer, ev idempotent.Event, d contract.PaymentApplyCanceledV1) error {
	c := reconciler.RepairCommandData{PaymentID: d.PaymentID, OrderID: d.OrderID, ProviderPaymentID: d.ProviderPaymentID,
		FindingID: d.FindingID, Kind: reconciler.Kind(d.Kind), ExpectedLocalStatus: string(d.ExpectedLocalStatus),
		ObservedProviderStatus: string(d.ObservedProviderStatus), DetectedAt: d.DetectedAt}
	return apply(ctx, tx, ev, c, payment.StatusFailed, func(id int64, c reconciler.RepairCommandData, source string) (bool, error) {
		return paymentstore.MarkFailed(ctx, tx, events, id, c.ObservedProviderStatus, source, c.ObservedProviderStatus)
	})
}

type writer func(paymentID int64, c reconciler.RepairCommandData, source string) (changed bool, err error)

func apply(ctx context.Context, tx pgx.Tx, ev idempotent.Event, c reconciler.RepairCommandData, target payment.Status, write writer) error {
	id, err := strconv.ParseInt(c.PaymentID, 10, 64)
	if err != nil {
		return idempotent.Permanent(fmt.Errorf("repair command %s: payment id %q: %w", ev.EventID, c.PaymentID, err))
	}
	// Lock the row first so the status read here is the one the writer
	// sees: a webhook applying the same transition waits or has committed.
	var status, ref string
	err = tx.QueryRow(ctx, `select status, coalesce(provider_payment_id, '') from payments where id = $1 for update`, id).
		Scan(&status, &ref)
	if errors.Is(err, pgx.ErrNoRows) {
		return idempotent.Permanent(fmt.Errorf("repair command %s: payment %d: %w", ev.EventID, id, paymentstore.ErrNotFound))
	}
	if err != nil {
		return fmt.Errorf("repair command %s: payment %d: %w", ev.EventID, id, err)
	}
	if ref != c.ProviderPaymentID {
		return idempotent.Permanent(fmt.Errorf("repair command %s: payment %d holds %q, command names %q: %w",
			ev.EventID, id, ref, c.ProviderPaymentID, ErrProviderMismatch))
	}
	how, note := reconciler.ResolutionAlreadyApplied, ""
	switch status {
	case string(target):
		// The live path got there first.
	case c.ExpectedLocalStatus:
		source := reconciler.RepairSource(c.FindingID)
		changed, err := write(id, c, source)
		if err != nil {
			if errors.Is(err, payment.ErrInvalidTransition) || errors.Is(err, paymentstore.ErrNoProviderID) {
				err = idempotent.Permanent(err)
			}
			return fmt.Errorf("repair command %s: payment %d (finding %d) → %s: %w", ev.EventID, id, c.FindingID, target, err)
		}
		if changed {
			how = reconciler.ResolutionRepaired
		}
	default:
		// The payment moved somewhere the command does not apply from
		// (e.g. failed while the command expected pending). Applying it
		// anyway would act on a stale picture; the next scan classifies
		// the payment as it is now.
		how = reconciler.ResolutionSuperseded
		note = fmt.Sprintf("payment was %s when the command (expected %s) arrived", status, c.ExpectedLocalStatus)
	}
	if _, err := reconcilerstore.ResolveFinding(ctx, tx, c.FindingID, how, ResolvedBy, note); err != nil {
		return fmt.Errorf("repair command %s: payment %d: %w", ev.EventID, id, err)
	}
	return nil
}
