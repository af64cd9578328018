package paymentstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/services/payment"
)

// LearnedOrder is an order.created as the payment service keeps it
// (known_orders).
type LearnedOrder struct {
	OrderID string
	EventID string // the order.created that made it known
	payment.KnownOrder
}

// KnownOrders returns what known_orders holds of the given orders; an
// order missing from the map is unknown. Call it with the orders locked
// (LockOrders) so the answer holds until the transaction ends.
func KnownOrders(ctx context.Context, tx pgx.Tx, orderIDs []string) (map[string]payment.KnownOrder, error) {
	known := make(map[string]payment.KnownOrder, len(orderIDs))
	if len(orderIDs) == 0 {
		return known, nil
	}
	rows, err := tx.Query(ctx, `select order_id, amount, currency, customer_id, payment_method, confirmed_at is not null
		from known_orders where order_id = any($1::text[])`, orderIDs)
	if err != nil {
		return nil, fmt.Errorf("read %d known orders: %w", len(orderIDs), err)
	}
	var id string
	var o payment.KnownOrder
	_, err = pgx.ForEachRow(rows, []any{&id, &o.Amount, &o.Currency, &o.CustomerID, &o.PaymentMethod, &o.Confirmed}, func() error {
		known[id] = o
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %d known orders: %w", len(orderIDs), err)
	}
	return known, nil
}

// LearnOrders stores orders made known by order.created, in one
// statement; an order already known keeps what it was first learned with.
func LearnOrders(ctx context.Context, tx pgx.Tx, orders []LearnedOrder) error {
	if len(orders) == 0 {
		return nil
	}
	n := len(orders)
	ids, events, currencies, customers, methods := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	amounts := make([]int64, n)
	for i, o := range orders {
		ids[i], events[i], amounts[i], currencies[i], customers[i], methods[i] = o.OrderID, o.EventID, o.Amount, o.Currency, o.CustomerID, o.PaymentMethod
	}
	if _, err := tx.Exec(ctx, `insert into known_orders (order_id, created_event_id, amount, currency, customer_id, payment_method)
		select * from unnest($1::text[], $2::uuid[], $3::bigint[], $4::text[], $5::text[], $6::text[])
		on conflict (order_id) do nothing`, ids, events, amounts, currencies, customers, methods); err != nil {
		return fmt.Errorf("store %d known orders: %w", n, err)
	}
	return nil
}

// ConfirmOrders notes that order-svc confirmed the given known orders.
func ConfirmOrders(ctx context.Context, tx pgx.Tx, orderIDs []string) error {
	if len(orderIDs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `update known_orders set confirmed_at = coalesce(confirmed_at, now())
		where order_id = any($1::text[])`, orderIDs); err != nil {
		return fmt.Errorf("confirm %d known orders: %w", len(orderIDs), err)
	}
	return nil
}

// WaitingReservation is an inventory.reserved kept aside until its order
// is known (waiting_reservations).
type WaitingReservation struct {
	EventID string
	OrderID string
	Claim   payment.ReservationClaim
	Data    json.RawMessage // the event's data, for a refusal's record
	// Waited is how long it has been waiting when read (zero for one
	// that just arrived).
	Waited time.Duration
}

// WaitingFor returns the reservations waiting for the given orders, by
// order, oldest first.
func WaitingFor(ctx context.Context, tx pgx.Tx, orderIDs []string) (map[string][]WaitingReservation, error) {
	waiting := map[string][]WaitingReservation{}
	if len(orderIDs) == 0 {
		return waiting, nil
	}
	rows, err := tx.Query(ctx, `select event_id::text, order_id, amount, currency, customer_id, payment_method, data,
			greatest(extract(epoch from (now() - received_at)), 0)::float8
		from waiting_reservations where order_id = any($1::text[]) order by received_at, event_id`, orderIDs)
	if err != nil {
		return nil, fmt.Errorf("read reservations waiting for %d orders: %w", len(orderIDs), err)
	}
	var w WaitingReservation
	var secs float64
	_, err = pgx.ForEachRow(rows, []any{&w.EventID, &w.OrderID, &w.Claim.Amount, &w.Claim.Currency, &w.Claim.CustomerID,
		&w.Claim.PaymentMethod, &w.Data, &secs}, func() error {
		w.Waited = time.Duration(secs * float64(time.Second))
		w.Data = append(json.RawMessage(nil), w.Data...)
		waiting[w.OrderID] = append(waiting[w.OrderID], w)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read reservations waiting for %d orders: %w", len(orderIDs), err)
	}
	return waiting, nil
}

// KeepWaiting stores reservations whose order is not known yet.
func KeepWaiting(ctx context.Context, tx pgx.Tx, ws []WaitingReservation) error {
	if len(ws) == 0 {
		return nil
	}
	n := len(ws)
	events, orders, currencies, customers, methods, data := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n)
	amounts := make([]int64, n)
	for i, w := range ws {
		d := w.Data
		if !json.Valid(d) {
			d = json.RawMessage("null")
		}
		events[i], orders[i], amounts[i], currencies[i], customers[i], methods[i], data[i] = w.EventID, w.OrderID, w.Claim.Amount,
			w.Claim.Currency, w.Claim.CustomerID, w.Claim.PaymentMethod, string(d)
	}
	if _, err := tx.Exec(ctx, `insert into waiting_reservations (event_id, order_id, amount, currency, customer_id, payment_method, data)
		select u.e, u.o, u.a, u.c, u.cu, u.m, u.d::jsonb
		from unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[]) as u(e, o, a, c, cu, m, d)
		on conflict (event_id) do nothing`, events, orders, amounts, currencies, customers, methods, data); err != nil {
		return fmt.Errorf("keep %d reservations waiting for their orders: %w", n, err)
	}
	return nil
}

// StopWaiting deletes waiting reservations that were charged or refused.
func StopWaiting(ctx context.Context, tx pgx.Tx, eventIDs []string) error {
	if len(eventIDs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `delete from waiting_reservations where event_id = any($1::uuid[])`, eventIDs); err != nil {
		return fmt.Errorf("settle %d waiting reservations: %w", len(eventIDs), err)
	}
	return nil
}

// OverdueOrders returns up to limit orders, sorted, with a reservation
// that has waited at least wait for them.
func OverdueOrders(ctx context.Context, pool *pgxpool.Pool, wait time.Duration, limit int) ([]string, error) {
	rows, err := pool.Query(ctx, `select order_id from (
			select distinct order_id from waiting_reservations where received_at <= now() - $1::float8 * interval '1 second'
		) o order by order_id limit $2`, wait.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("find reservations waiting over %s: %w", wait, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find reservations waiting over %s: %w", wait, err)
	}
	return ids, nil
}
