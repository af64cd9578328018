// Package postgres keeps stock and reservations in PostgreSQL and applies
// the inventory rules inside the consumer's transaction, appending the
// resulting event to the outbox in the same transaction.
package postgres

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/services/internal/sagaevent"
	"github.com/concordhq/concord/services/inventory"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which inventory migrations ran.
const VersionTable = "inventory_schema_version"

// Migrate creates or updates the inventory tables.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	return pgmigrate.Apply(ctx, pool, VersionTable, sub)
}

// Release reasons; the order service shows them as its cancellation reason.
const (
	ReasonPaymentDeclined = "payment_declined"
	ReasonOrderCancelled  = "order_cancelled"
	ReasonOutOfStock      = "out_of_stock"
)

// Stock is one SKU's buckets.
type Stock struct {
	SKU       string `json:"sku"`
	Received  int64  `json:"received"`
	Available int64  `json:"available"`
	Reserved  int64  `json:"reserved"`
	Committed int64  `json:"committed"`
}

// Receive adds stock (available and received) for each line, creating
// SKUs as needed, in one transaction.
func Receive(ctx context.Context, pool *pgxpool.Pool, lines []inventory.Line) error {
	lines, err := inventory.Normalize(lines)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, l := range lines {
			if _, err := tx.Exec(ctx, `insert into stock (sku, received, available) values ($1, $2, $2)
				on conflict (sku) do update set received = stock.received + $2, available = stock.available + $2, updated_at = now()`,
				l.SKU, l.Quantity); err != nil {
				return fmt.Errorf("receive %d of %s: %w", l.Quantity, l.SKU, err)
			}
		}
		return nil
	})
}

// ListStock returns every SKU's buckets, by SKU.
func ListStock(ctx context.Context, pool *pgxpool.Pool) ([]Stock, error) {
	rows, err := pool.Query(ctx, `select sku, received, available, reserved, committed from stock order by sku`)
	if err != nil {
		return nil, fmt.Errorf("list stock: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Stock])
}

// ReserveRequest is an order.created event as the inventory sees it. The
// payment fields pass through to inventory.reserved, so the payment service
// learns what to charge without reading the order service's events.
type ReserveRequest struct {
	OrderID       string
	Lines         []inventory.Line
	Amount        int64
	Currency      string
	CustomerID    string
	PaymentMethod string
	CausationID   string
}

// Reserve reserves every line of an order or none, inside tx, and appends
// inventory.reserved or inventory.rejected. Each line is one guarded
// UPDATE (available >= quantity), so stock can never go negative however
// many reservations race; lines are taken in SKU order, so concurrent
// reservations never deadlock. A shortfall rolls back to a savepoint, so
// lines already taken are returned. A second call for the same order does
// nothing and returns the existing status.
func Reserve(ctx context.Context, tx pgx.Tx, r ReserveRequest) (inventory.Status, error) {
	var existing string
	err := tx.QueryRow(ctx, `select status from reservations where order_id = $1`, r.OrderID).Scan(&existing)
	if err == nil {
		return inventory.Status(existing), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("read reservation of order %s: %w", r.OrderID, err)
	}
	lines, err := inventory.Normalize(r.Lines)
	if err != nil {
		return "", fmt.Errorf("order %s: %w", r.OrderID, err)
	}
	// The guarded updates run under a savepoint, sent in one round trip
	// with it; the savepoint is released or rolled back in the same round
	// trip as the reservation's insert. A shortfall thus returns the lines
	// already taken, and a reservation costs three round trips however many
	// lines it has.
	b := &pgx.Batch{}
	b.Queue(`savepoint reserve_lines`)
	for _, l := range lines {
		b.Queue(`update stock set available = available - $2, reserved = reserved + $2, updated_at = now()
			where sku = $1 and available >= $2`, l.SKU, l.Quantity)
	}
	var short []string
	err = func() error {
		br := tx.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		for _, l := range lines {
			tag, err := br.Exec()
			if err != nil {
				return fmt.Errorf("reserve %d of %s: %w", l.Quantity, l.SKU, err)
			}
			if tag.RowsAffected() == 0 {
				short = append(short, l.SKU)
			}
		}
		return br.Close()
	}()
	if err != nil {
		return "", fmt.Errorf("order %s: %w", r.OrderID, err)
	}

	resID := schemas.NewEventID()
	status := inventory.StatusHeld
	reason := ""
	end := `release savepoint reserve_lines`
	if len(short) > 0 {
		status, reason = inventory.StatusRejected, ReasonOutOfStock
		end = `rollback to savepoint reserve_lines`
	}
	linesJSON, _ := json.Marshal(lines)
	b = &pgx.Batch{}
	b.Queue(end)
	b.Queue(`insert into reservations (id, order_id, status, lines, reason) values ($1, $2, $3, $4, nullif($5, ''))`,
		resID, r.OrderID, string(status), linesJSON, reason)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return "", fmt.Errorf("order %s: %s and store reservation: %w", r.OrderID, end, err)
	}
	ev := outbox.Event{AggregateID: r.OrderID, CorrelationID: r.OrderID, CausationID: r.CausationID}
	if status == inventory.StatusRejected {
		ev.Type = "inventory.rejected"
		ev.Data = map[string]any{"order_id": r.OrderID, "reason": reason, "skus": short}
	} else {
		ev.Type = "inventory.reserved"
		ev.Data = map[string]any{"order_id": r.OrderID, "reservation_id": resID, "items": lines,
			"amount": r.Amount, "currency": r.Currency, "customer_id": r.CustomerID, "payment_method": r.PaymentMethod}
	}
	if _, err := sagaevent.Append(ctx, tx, ev); err != nil {
		return "", fmt.Errorf("order %s: %w", r.OrderID, err)
	}
	return status, nil
}

// Apply moves an order's reservation on a commit or release, inside tx,
// guarded by the reservation's status (see inventory.Decide). A release
// appends inventory.released with reason. An order with no reservation
// (its order.created was never seen or it was rejected) is left alone.
func Apply(ctx context.Context, tx pgx.Tx, orderID string, a inventory.Action, reason, causationID string) (bool, error) {
	var resID, st string
	var linesJSON []byte
	err := tx.QueryRow(ctx, `select id::text, status, lines from reservations where order_id = $1 for update`, orderID).Scan(&resID, &st, &linesJSON)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock reservation of order %s: %w", orderID, err)
	}
	next, move, ok := inventory.Decide(inventory.Status(st), a)
	if !ok {
		return false, nil
	}
	var lines []inventory.Line
	if err := json.Unmarshal(linesJSON, &lines); err != nil {
		return false, fmt.Errorf("reservation %s lines: %w", resID, err)
	}
	// Column names come from inventory.Decide's fixed set, never from input.
	q := fmt.Sprintf(`update stock set %[1]s = %[1]s - $2, %[2]s = %[2]s + $2, updated_at = now() where sku = $1`, move.From, move.To)
	// The moves and the status change go in one round trip.
	b := &pgx.Batch{}
	for _, l := range lines { // already in SKU order
		b.Queue(q, l.SKU, l.Quantity)
	}
	b.Queue(`update reservations set status = $2, reason = coalesce(nullif($3, ''), reason), updated_at = now() where id = $1`,
		resID, string(next), reason)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("reservation %s (order %s) → %s: move %v %s → %s: %w", resID, orderID, next, lines, move.From, move.To, err)
	}
	if next == inventory.StatusReleased {
		_, err := sagaevent.Append(ctx, tx, outbox.Event{Type: "inventory.released", AggregateID: orderID, CorrelationID: orderID,
			CausationID: causationID, Data: map[string]any{"order_id": orderID, "reservation_id": resID, "reason": reason}})
		if err != nil {
			return false, fmt.Errorf("order %s: %w", orderID, err)
		}
	}
	return true, nil
}
