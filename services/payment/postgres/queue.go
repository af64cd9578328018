package postgres

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
	p.version, p.customer_id, p.payment_method, p.attempts, p.order_cancelled, coalesce(p.failure_reason, '')`

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

// StoreProviderEvent stores a verified webhook event before anything acts
// on it. It returns fresh=false when the provider's event id was stored
// before (a duplicated or retried delivery), after counting the delivery.
func StoreProviderEvent(ctx context.Context, tx pgx.Tx, id, typ, providerPaymentID string, payload []byte) (fresh bool, err error) {
	if !json.Valid(payload) {
		return false, fmt.Errorf("provider event %s: payload is not JSON", id)
	}
	err = tx.QueryRow(ctx, `insert into provider_events (id, type, provider_payment_id, payload) values ($1, $2, nullif($3, ''), $4)
		on conflict (id) do update set deliveries = provider_events.deliveries + 1
		returning deliveries = 1`, id, typ, providerPaymentID, payload).Scan(&fresh)
	if err != nil {
		return false, fmt.Errorf("store provider event %s: %w", id, err)
	}
	return fresh, nil
}

// MarkProviderEventApplied records what applying a provider event did.
func MarkProviderEventApplied(ctx context.Context, tx pgx.Tx, id, result string) error {
	if _, err := tx.Exec(ctx, `update provider_events set applied = $2 where id = $1`, id, result); err != nil {
		return fmt.Errorf("provider event %s: %w", id, err)
	}
	return nil
}
