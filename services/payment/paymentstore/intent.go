package paymentstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/services/payment"
)

// NewIntent is what the payment service knows when a reservation asks it to
// charge an order.
type NewIntent struct {
	OrderID       string
	Amount        int64
	Currency      string
	CustomerID    string
	PaymentMethod string
	// Traceparent is the trace of the span that asked for the charge
	// (kit.Traceparent), stored with the payment; "" with tracing off.
	Traceparent string
}

// CreateIntent stores the intent row, with the idempotency key derived from
// the order, before any provider call. It is idempotent on the order: a
// second call returns the existing payment with created=false.
func CreateIntent(ctx context.Context, tx pgx.Tx, in NewIntent) (p Payment, created bool, err error) {
	var id int64
	err = tx.QueryRow(ctx, `insert into payments (order_id, idempotency_key, amount, currency, customer_id, payment_method, traceparent)
		values ($1, $2, $3, $4, $5, $6, nullif($7, '')) on conflict (order_id) do nothing returning id`,
		in.OrderID, payment.IdempotencyKey(in.OrderID), in.Amount, in.Currency, in.CustomerID, in.PaymentMethod, in.Traceparent).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		p, err = ByOrder(ctx, tx, in.OrderID)
		return p, false, err
	case err != nil:
		return Payment{}, false, fmt.Errorf("store payment intent of order %s: %w", in.OrderID, err)
	}
	p, err = Get(ctx, tx, id)
	return p, true, err
}

// CreateIntents stores the intent rows of a batch of reservations in one
// statement, skipping orders already cancelled (cancelled_orders) and
// orders that have an intent (a redelivered reservation). It returns how
// many intents it created. One statement per consumer batch instead of
// three round trips per reservation: the reservation is on every order's
// path.
func CreateIntents(ctx context.Context, tx pgx.Tx, ins []NewIntent) (int64, error) {
	if len(ins) == 0 {
		return 0, nil
	}
	orders, keys, currencies, customers, methods, traces := make([]string, len(ins)), make([]string, len(ins)),
		make([]string, len(ins)), make([]string, len(ins)), make([]string, len(ins)), make([]string, len(ins))
	amounts := make([]int64, len(ins))
	for i, in := range ins {
		orders[i], keys[i], amounts[i] = in.OrderID, payment.IdempotencyKey(in.OrderID), in.Amount
		currencies[i], customers[i], methods[i], traces[i] = in.Currency, in.CustomerID, in.PaymentMethod, in.Traceparent
	}
	tag, err := tx.Exec(ctx, `insert into payments (order_id, idempotency_key, amount, currency, customer_id, payment_method, traceparent)
		select u.oid, u.key, u.amount, u.currency, u.customer, u.method, nullif(u.trace, '')
		from unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[]) with ordinality
			as u(oid, key, amount, currency, customer, method, trace, n)
		where not exists (select 1 from cancelled_orders c where c.order_id = u.oid)
		order by u.n
		on conflict (order_id) do nothing`, orders, keys, amounts, currencies, customers, methods, traces)
	if err != nil {
		return 0, fmt.Errorf("store %d payment intents: %w", len(ins), err)
	}
	return tag.RowsAffected(), nil
}

// RecordCancelledOrder notes that an order was cancelled: a reservation that
// arrives later creates no charge, and a payment that is or becomes paid is
// refunded. It returns the order's payment id, or 0 when it has none yet.
func RecordCancelledOrder(ctx context.Context, tx pgx.Tx, orderID, reason string) (int64, error) {
	if _, err := tx.Exec(ctx, `insert into cancelled_orders (order_id, reason) values ($1, $2) on conflict do nothing`, orderID, reason); err != nil {
		return 0, fmt.Errorf("record cancellation of order %s: %w", orderID, err)
	}
	var id int64
	err := tx.QueryRow(ctx, `update payments set order_cancelled = true, refund_next_attempt_at = now(), updated_at = now()
		where order_id = $1 returning id`, orderID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("mark payment of order %s cancelled: %w", orderID, err)
	}
	return id, nil
}

// LockOrders takes a transaction-scoped advisory lock per order id, in the
// order given (sort it). A reservation's intent and the order's
// cancellation arrive on different topics and may be applied by two
// concurrent transactions; each reads what the other writes (the intent
// checks cancelled_orders, the cancellation marks the payment), so without
// a lock both can miss the other, and a cancelled order is charged and
// never refunded. Locking every order of a batch up front, in one order,
// cannot deadlock.
func LockOrders(ctx context.Context, tx pgx.Tx, orderIDs []string) error {
	if len(orderIDs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtextextended(o, 0)) from unnest($1::text[]) o`, orderIDs); err != nil {
		return fmt.Errorf("lock %d orders: %w", len(orderIDs), err)
	}
	return nil
}
