package paymentstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ClaimCharges takes up to limit pending payments that are due for a
// provider call and pushes their next attempt lease into the future, so
// other workers (or this one after a crash) retry them only once the lease
// has passed. The caller then calls the provider and records the outcome.
func ClaimCharges(ctx context.Context, pool *pgxpool.Pool, limit int, lease time.Duration) ([]Payment, error) {
	rows, err := pool.Query(ctx, `update payments p set next_attempt_at = now() + make_interval(secs => $2), attempts = p.attempts + 1
		from (select id from payments where status = 'pending' and next_attempt_at <= now()
		      order by next_attempt_at limit $1 for update skip locked) due
		where p.id = due.id
		returning `+claimedCols, limit, lease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("claim due charges: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Payment, error) { return scanPayment(r) })
	if err != nil {
		return nil, fmt.Errorf("claim due charges: %w", err)
	}
	return out, nil
}

// ClaimRefunds takes up to limit paid payments whose order was cancelled
// and that are due for a refund call, with a lease like ClaimCharges.
func ClaimRefunds(ctx context.Context, pool *pgxpool.Pool, limit int, lease time.Duration) ([]Payment, error) {
	rows, err := pool.Query(ctx, `update payments p set refund_next_attempt_at = now() + make_interval(secs => $2), refund_attempts = p.refund_attempts + 1
		from (select id from payments where status = 'paid' and order_cancelled and refund_next_attempt_at <= now()
		      order by refund_next_attempt_at limit $1 for update skip locked) due
		where p.id = due.id
		returning `+claimedCols, limit, lease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("claim due refunds: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Payment, error) { return scanPayment(r) })
	if err != nil {
		return nil, fmt.Errorf("claim due refunds: %w", err)
	}
	return out, nil
}

// claimedCols are paymentCols qualified with the updated table: the claims
// run an UPDATE … FROM, where a bare "id" would be ambiguous.
const claimedCols = `p.id, p.order_id, p.idempotency_key, coalesce(p.provider_payment_id, ''), p.amount, p.currency, p.status,
	p.version, p.customer_id, p.payment_method, p.attempts, p.order_cancelled, coalesce(p.failure_reason, ''),
	coalesce(p.observed_external_status, ''), coalesce(p.traceparent, '')`

// RetryChargeAt records why a call left the payment pending and when to
// try again; a zero time parks it until a webhook or the reconciler moves
// it.
func RetryChargeAt(ctx context.Context, q Execer, paymentID int64, at time.Time, observed, lastErr string) error {
	var next any = at
	if at.IsZero() {
		next = "infinity"
	}
	_, err := q.Exec(ctx, `update payments set next_attempt_at = $2::timestamptz, last_error = nullif($4, ''),
		observed_external_status = coalesce(nullif($3, ''), observed_external_status), updated_at = now() where id = $1`,
		paymentID, next, observed, lastErr)
	if err != nil {
		return fmt.Errorf("payment %d: schedule retry: %w", paymentID, err)
	}
	return nil
}

// RetryRefundAt records a failed refund attempt and when to try again.
func RetryRefundAt(ctx context.Context, q Execer, paymentID int64, at time.Time, lastErr string) error {
	_, err := q.Exec(ctx, `update payments set refund_next_attempt_at = $2, last_error = nullif($3, ''), updated_at = now() where id = $1`,
		paymentID, at, lastErr)
	if err != nil {
		return fmt.Errorf("payment %d: schedule refund retry: %w", paymentID, err)
	}
	return nil
}

// SetRefundID records the provider's refund id.
func SetRefundID(ctx context.Context, q Execer, paymentID int64, refundID string) error {
	if _, err := q.Exec(ctx, `update payments set refund_id = $2 where id = $1`, paymentID, refundID); err != nil {
		return fmt.Errorf("payment %d: record refund %s: %w", paymentID, refundID, err)
	}
	return nil
}

// Execer is what writes outside the canonical writer need.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Receive stores a verified webhook event and reads the payment it is
// about, in one round trip and outside any transaction: the raw event is
// committed before anything acts on it. pending is false when the event
// was applied before (a duplicated or retried delivery, counted); it is
// true for a first delivery and for a redelivery of an event whose
// application failed, which is then applied now. The payment is looked up
// by the provider's id, else by the payment id the intent's metadata
// carries (0: none); found is false when neither names one of ours.
func Receive(ctx context.Context, pool *pgxpool.Pool, ev ProviderEvent) (pending bool, p Payment, found bool, err error) {
	if !json.Valid(ev.Payload) {
		return false, Payment{}, false, fmt.Errorf("provider event %s: payload is not JSON", ev.ID)
	}
	b := &pgx.Batch{}
	b.Queue(`insert into provider_events (id, type, provider_payment_id, payload) values ($1, $2, nullif($3, ''), $4)
		on conflict (id) do update set deliveries = provider_events.deliveries + 1
		returning applied is null`, ev.ID, ev.Type, ev.ProviderPaymentID, ev.Payload).QueryRow(func(r pgx.Row) error {
		return r.Scan(&pending)
	})
	// A payment tied to the provider id comes first; the metadata's id
	// serves when our first call's answer was lost before we stored it.
	b.Queue(`select `+paymentCols+` from payments where provider_payment_id = $1 or id = $2
		order by provider_payment_id = $1 desc nulls last limit 1`, ev.ProviderPaymentID, ev.PaymentID).Query(func(rows pgx.Rows) error {
		ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Payment, error) { return scanPayment(r) })
		if len(ps) > 0 {
			p, found = ps[0], true
		}
		return err
	})
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		return false, Payment{}, false, fmt.Errorf("store provider event %s: %w", ev.ID, err)
	}
	return pending, p, found, nil
}

// MarkUnchanged records that provider event eventID changes nothing about
// payment p (already applied by another path, or stale news): the
// provider's status is noted when it is news, and the event is marked
// applied, in one round trip. Call it only when the canonical writer
// would change nothing (payment.Decide is not Apply); that stays so once
// it holds, since a payment only moves forward, so no row lock is needed.
func MarkUnchanged(ctx context.Context, pool *pgxpool.Pool, eventID string, p Payment, observed string) error {
	b := &pgx.Batch{}
	if observed != "" && observed != p.ObservedStatus {
		b.Queue(`update payments set observed_external_status = $2 where id = $1`, p.ID, observed)
	}
	b.Queue(`update provider_events set applied = $2 where id = $1 and applied is null`, eventID, ResultUnchanged)
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("provider event %s on payment %d: %w", eventID, p.ID, err)
	}
	return nil
}

// ProviderEvent is a verified webhook delivery as Receive stores it.
type ProviderEvent struct {
	ID, Type          string
	ProviderPaymentID string // the payment the event is about, when it names one
	PaymentID         int64  // our payment id from the intent's metadata, 0 when absent
	Payload           []byte // the raw body, kept as received
}

const markAppliedSQL = `update provider_events set applied = $2 where id = $1 and applied is null`

// MarkProviderEventApplied records what applying a provider event did,
// unless a concurrent delivery of the same event recorded it first.
func MarkProviderEventApplied(ctx context.Context, q Execer, id, result string) error {
	if _, err := q.Exec(ctx, markAppliedSQL, id, result); err != nil {
		return fmt.Errorf("provider event %s: %w", id, err)
	}
	return nil
}
