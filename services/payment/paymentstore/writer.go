// Package paymentstore is the payment service's record in PostgreSQL and its
// canonical writer: MarkPaid, MarkFailed and MarkRefunded are the only code
// that changes a payment's status. The synchronous provider answer, the
// webhook, the pending-payment poller and the reconciler's repair commands
// all call them, so a transition is applied once, bumps the version once
// and emits its event once, whichever path learns of it first.
package paymentstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which payment migrations ran.
const VersionTable = "payment_schema_version"

// Migrate creates or updates the payment tables (not the outbox's or the
// consumers', which migrate themselves).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// Errors callers branch on.
var (
	// ErrNotFound: no payment with that id (or order, or provider id).
	ErrNotFound = errors.New("payment not found")
	// ErrNoProviderID: MarkPaid and MarkRefunded need the provider's
	// payment id in the event; call AttachProvider first.
	ErrNoProviderID = errors.New("payment has no provider payment id")
	// ErrProviderMismatch: the payment is already tied to another provider
	// payment; two charges for one order, an operator must look.
	ErrProviderMismatch = errors.New("payment is tied to another provider payment")
)

// Payment is one row of the payments table.
type Payment struct {
	ID                int64
	OrderID           string
	IdempotencyKey    string
	ProviderPaymentID string // empty until the provider answered
	Amount            int64
	Currency          string
	Status            payment.Status
	Version           int64
	CustomerID        string
	PaymentMethod     string
	Attempts          int
	OrderCancelled    bool
	FailureReason     string
	ObservedStatus    string // the provider's status as last observed
	// Traceparent is the trace of the span that created the payment (the
	// consumer's span of the event that asked for the charge), "" with
	// tracing off: the charger's attempts, the webhooks and the repairs
	// that move the payment continue it.
	Traceparent string
}

const paymentCols = `id, order_id, idempotency_key, coalesce(provider_payment_id, ''), amount, currency, status,
	version, customer_id, payment_method, attempts, order_cancelled, coalesce(failure_reason, ''),
	coalesce(observed_external_status, ''), coalesce(traceparent, '')`

func scanPayment(row pgx.Row) (Payment, error) {
	var p Payment
	var status string
	err := row.Scan(&p.ID, &p.OrderID, &p.IdempotencyKey, &p.ProviderPaymentID, &p.Amount, &p.Currency, &status,
		&p.Version, &p.CustomerID, &p.PaymentMethod, &p.Attempts, &p.OrderCancelled, &p.FailureReason, &p.ObservedStatus,
		&p.Traceparent)
	p.Status = payment.Status(status)
	return p, err
}

// lockPayment reads a payment and holds its row lock until tx ends, so two
// writers of the same payment serialise and the second sees the first's
// result.
func lockPayment(ctx context.Context, tx pgx.Tx, id int64) (Payment, error) {
	p, err := scanPayment(tx.QueryRow(ctx, lockSQL, id))
	return p, lockErr(id, err)
}

const lockSQL = `select ` + paymentCols + ` from payments where id = $1 for update`

func lockErr(id int64, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("payment %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("lock payment %d: %w", id, err)
	}
	return nil
}

// Get reads a payment by id without locking it.
func Get(ctx context.Context, q Querier, id int64) (Payment, error) {
	p, err := scanPayment(q.QueryRow(ctx, `select `+paymentCols+` from payments where id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Payment{}, fmt.Errorf("payment %d: %w", id, ErrNotFound)
	}
	return p, err
}

// ByOrder reads the payment of an order.
func ByOrder(ctx context.Context, q Querier, orderID string) (Payment, error) {
	p, err := scanPayment(q.QueryRow(ctx, `select `+paymentCols+` from payments where order_id = $1`, orderID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Payment{}, fmt.Errorf("payment of order %s: %w", orderID, ErrNotFound)
	}
	return p, err
}

// ByProviderID reads the payment tied to a provider payment.
func ByProviderID(ctx context.Context, q Querier, providerID string) (Payment, error) {
	p, err := scanPayment(q.QueryRow(ctx, `select `+paymentCols+` from payments where provider_payment_id = $1`, providerID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Payment{}, fmt.Errorf("payment with provider id %s: %w", providerID, ErrNotFound)
	}
	return p, err
}

// Querier is what reads need: a pool, a connection or a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// AttachProvider ties a payment to the provider's payment id the first
// time the provider names it. Attaching the same id again is a no-op;
// attaching another is ErrProviderMismatch.
func AttachProvider(ctx context.Context, tx pgx.Tx, paymentID int64, providerPaymentID string) error {
	if providerPaymentID == "" {
		return nil
	}
	var current string
	err := tx.QueryRow(ctx, `update payments set provider_payment_id = coalesce(provider_payment_id, $2), updated_at = now()
		where id = $1 returning provider_payment_id`, paymentID, providerPaymentID).Scan(&current)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("payment %d: %w", paymentID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("attach provider payment %s to payment %d: %w", providerPaymentID, paymentID, err)
	}
	if current != providerPaymentID {
		return fmt.Errorf("payment %d has %s, provider reports %s: %w", paymentID, current, providerPaymentID, ErrProviderMismatch)
	}
	return nil
}

// Observation is what one path learned about a payment from the provider.
type Observation struct {
	// To is the status the provider's answer means.
	To payment.Status
	// ProviderPaymentID, when set, is attached to the payment if it has
	// none yet (as AttachProvider would) in the same statement as the
	// transition; another id than the one attached is ErrProviderMismatch.
	ProviderPaymentID string
	// Observed is the provider status that told us (e.g. "succeeded").
	Observed string
	// Source names the path ("sync", "webhook:evt_…", "poller", "reconciler").
	Source string
	// Reason is a failure's decline code.
	Reason string
}

// Record applies what the provider said about a payment in tx: the
// transition to o.To when the current status allows it (payment.Decide),
// else only the observation. It returns changed=false when the status
// stayed; a retry or a duplicate is never an error.
//
// It takes two round trips: the row lock, then the outbox event, the
// payment's update and its transition row sent together. Every charge and
// every webhook passes here, so it used to be the payment service's
// largest share of database round trips.
func Record(ctx context.Context, tx pgx.Tx, events outbox.Writer, paymentID int64, o Observation) (bool, error) {
	return transition(ctx, tx, events, paymentID, o)
}

// MarkPaid moves a payment to paid and emits payment.processed in tx.
// observed is the provider status that told us (e.g. "succeeded"), source
// names the path ("sync", "webhook:evt_…", "poller", "reconciler"). It
// returns changed=false when the payment already was paid, or was refunded
// since; a retry or a duplicate is never an error.
func MarkPaid(ctx context.Context, tx pgx.Tx, events outbox.Writer, paymentID int64, observed, source string) (bool, error) {
	return transition(ctx, tx, events, paymentID, Observation{To: payment.StatusPaid, Observed: observed, Source: source})
}

// MarkFailed moves a pending payment to failed with reason (the decline
// code) and emits payment.failed in tx. A payment already paid or refunded
// is left alone (changed=false): a late decline notice is stale news.
func MarkFailed(ctx context.Context, tx pgx.Tx, events outbox.Writer, paymentID int64, observed, source, reason string) (bool, error) {
	return transition(ctx, tx, events, paymentID, Observation{To: payment.StatusFailed, Observed: observed, Source: source, Reason: reason})
}

// MarkRefunded moves a payment to refunded and emits payment.refunded in tx.
func MarkRefunded(ctx context.Context, tx pgx.Tx, events outbox.Writer, paymentID int64, observed, source string) (bool, error) {
	return transition(ctx, tx, events, paymentID, Observation{To: payment.StatusRefunded, Observed: observed, Source: source})
}

// RecordAlone is Record in a transaction of its own, in two round trips
// where BeginFunc and Record take four: BEGIN goes with the row lock, the
// writes with COMMIT. The charger records every provider answer this way.
func RecordAlone(ctx context.Context, pool *pgxpool.Pool, events outbox.Writer, paymentID int64, o Observation) (changed bool, err error) {
	err = alone(ctx, pool, paymentID, func(p Payment) (w *pgx.Batch, err error) {
		w, changed, err = plan(ctx, events, p, o)
		return w, err
	})
	if err != nil {
		return false, fmt.Errorf("payment %d → %s: %w", paymentID, o.To, err)
	}
	return changed, nil
}

// Results of applying a provider event, as ApplyProviderEvent and the
// webhook endpoint record them in provider_events.applied.
const (
	ResultApplied          = "applied"
	ResultUnchanged        = "unchanged"
	ResultProviderMismatch = "provider_mismatch"
	// ResultIgnored: an event type nothing acts on, stored and left.
	ResultIgnored = "ignored"
	// ResultUnknownPayment: the event names no payment this service made.
	ResultUnknownPayment = "unknown_payment"
)

// ApplyProviderEvent is Record of what provider event eventID says, in a
// transaction of its own that also marks the event applied with the
// result (MarkProviderEventApplied): two round trips where BeginFunc,
// Record and the mark took five, and every webhook that moves a payment
// passes here. A payment tied to another provider payment is
// ResultProviderMismatch, recorded for the reconciler and not an error:
// retrying the delivery would not help.
func ApplyProviderEvent(ctx context.Context, pool *pgxpool.Pool, events outbox.Writer, paymentID int64, o Observation, eventID string) (result string, err error) {
	err = alone(ctx, pool, paymentID, func(p Payment) (*pgx.Batch, error) {
		w, changed, err := plan(ctx, events, p, o)
		switch {
		case errors.Is(err, ErrProviderMismatch):
			w, result = &pgx.Batch{}, ResultProviderMismatch
		case err != nil:
			return nil, err
		case changed:
			result = ResultApplied
		default:
			result = ResultUnchanged
		}
		w.Queue(markAppliedSQL, eventID, result)
		return w, nil
	})
	if err != nil {
		return "", fmt.Errorf("provider event %s on payment %d: %w", eventID, paymentID, err)
	}
	return result, nil
}

// alone runs a canonical write in a transaction of its own, in two round
// trips: BEGIN with the payment's row lock, then the writes writesFor
// returns for the locked row with COMMIT.
func alone(ctx context.Context, pool *pgxpool.Pool, paymentID int64, writesFor func(Payment) (*pgx.Batch, error)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A failure leaves the transaction open (aborted): the pool destroys a
	// connection released in a transaction, which rolls it back, so the
	// next user never inherits it.
	defer conn.Release()
	var p Payment
	b := &pgx.Batch{}
	b.Queue("begin")
	b.Queue(lockSQL, paymentID).QueryRow(func(r pgx.Row) (err error) {
		p, err = scanPayment(r)
		return lockErr(paymentID, err)
	})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	w, err := writesFor(p)
	if err != nil {
		return err
	}
	w.Queue("commit")
	return conn.SendBatch(ctx, w).Close()
}

func transition(ctx context.Context, tx pgx.Tx, events outbox.Writer, id int64, o Observation) (bool, error) {
	p, err := lockPayment(ctx, tx, id)
	if err != nil {
		return false, err
	}
	w, changed, err := plan(ctx, events, p, o)
	if err != nil || w.Len() == 0 {
		return false, err
	}
	if err := tx.SendBatch(ctx, w).Close(); err != nil {
		return false, fmt.Errorf("payment %d → %s: %w", id, o.To, err)
	}
	return changed, nil
}

// plan decides what o does to p, locked, and returns the writes: the
// transition (event, update, transition row) when payment.Decide applies
// it, else at most the observation. changed reports a transition. The
// event carries the trace of ctx (a webhook's request, a charge attempt).
func plan(ctx context.Context, events outbox.Writer, p Payment, o Observation) (w *pgx.Batch, changed bool, err error) {
	w = &pgx.Batch{}
	id, to := p.ID, o.To
	if to == payment.StatusFailed && o.Reason == "" {
		o.Reason = "declined"
	}
	if to != payment.StatusFailed {
		o.Reason = ""
	}
	attach := ""
	switch {
	case o.ProviderPaymentID == "" || o.ProviderPaymentID == p.ProviderPaymentID:
	case p.ProviderPaymentID != "":
		return nil, false, fmt.Errorf("payment %d has %s, provider reports %s: %w", id, p.ProviderPaymentID, o.ProviderPaymentID, ErrProviderMismatch)
	default:
		attach, p.ProviderPaymentID = o.ProviderPaymentID, o.ProviderPaymentID
	}
	d, err := payment.Decide(p.Status, to)
	if err != nil {
		return nil, false, fmt.Errorf("payment %d (order %s): %w", id, p.OrderID, err)
	}
	if d != payment.Apply {
		// Record what the provider said even when nothing changes, so the
		// reconciler sees the latest observation.
		// An observation the row already holds is not written again:
		// the charger's answer and the webhook usually both arrive, and
		// the second would rewrite the row (and its indexes) unchanged.
		if (o.Observed != "" && o.Observed != p.ObservedStatus) || attach != "" {
			w.Queue(`update payments set observed_external_status = coalesce(nullif($2, ''), observed_external_status),
				provider_payment_id = coalesce(provider_payment_id, nullif($3, '')) where id = $1`, id, o.Observed, attach)
		}
		return w, false, nil
	}
	if to != payment.StatusFailed && p.ProviderPaymentID == "" {
		return nil, false, fmt.Errorf("mark payment %d (order %s) %s: %w", id, p.OrderID, to, ErrNoProviderID)
	}
	env, err := events.Queue(w, outbox.Traced(ctx, outbox.Event{Payload: transitionEvent(p, to, o.Reason),
		AggregateID: p.OrderID, CorrelationID: p.OrderID, Headers: map[string]string{"source": o.Source}}))
	if err != nil {
		return nil, false, fmt.Errorf("payment %d (order %s) → %s: %w", id, p.OrderID, to, err)
	}
	w.Queue(`update payments set status = $2, version = version + 1, updated_at = now(),
		observed_external_status = coalesce(nullif($3, ''), observed_external_status),
		failure_reason = case when $2 = 'failed' then $4 else failure_reason end, last_source = $5,
		provider_payment_id = coalesce(provider_payment_id, nullif($6, ''))
		where id = $1`, id, string(to), o.Observed, o.Reason, o.Source, attach)
	w.Queue(`insert into payment_transitions (payment_id, from_status, to_status, source, observed, event_id)
		values ($1, $2, $3, $4, nullif($5, ''), $6)`, id, string(p.Status), string(to), o.Source, o.Observed, env.EventID)
	return w, true, nil
}

// transitionEvent is the event p's transition to to reports.
func transitionEvent(p Payment, to payment.Status, reason string) contract.Payload {
	id := strconv.FormatInt(p.ID, 10)
	switch to {
	case payment.StatusPaid:
		return contract.PaymentProcessedV1{OrderID: p.OrderID, PaymentID: id, ProviderPaymentID: p.ProviderPaymentID,
			Amount: p.Amount, Currency: p.Currency}
	case payment.StatusFailed:
		amount := p.Amount
		return contract.PaymentFailedV1{OrderID: p.OrderID, PaymentID: id, Reason: reason, Amount: &amount, Currency: p.Currency}
	case payment.StatusRefunded:
		reason := "refunded"
		if p.OrderCancelled {
			reason = "order_cancelled"
		}
		return contract.PaymentRefundedV1{OrderID: p.OrderID, PaymentID: id, ProviderPaymentID: p.ProviderPaymentID,
			Amount: p.Amount, Currency: p.Currency, Reason: reason}
	}
	return nil // no event: Queue refuses a nil payload
}
