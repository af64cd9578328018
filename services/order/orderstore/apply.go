package orderstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/order"
)

// Signal is one saga signal for one order: what happened (Signal, with
// the cancellation Reason it carries) and the event that carried it
// (EventID; empty for the sweeper's timeout).
type Signal struct {
	OrderID string
	Signal  order.Signal
	Reason  string
	EventID string
}

// Outcome is what a Signal did. Found is false when no order has its id
// (another deployment's order on a shared topic); Changed when it moved
// the order.
type Outcome struct {
	Found, Changed bool
}

// Apply moves an order by one saga signal inside tx; it is ApplyBatch of
// one signal, and an order that does not exist is ErrNotFound.
func Apply(ctx context.Context, tx pgx.Tx, out outbox.Emitter, orderID string, sig order.Signal, reason, eventID string) (changed bool, err error) {
	res, err := ApplyBatch(ctx, tx, out, []Signal{{OrderID: orderID, Signal: sig, Reason: reason, EventID: eventID}})
	if err != nil {
		return false, err
	}
	if !res[0].Found {
		return false, fmt.Errorf("order %s (%s event %s): %w", orderID, sig, eventID, ErrNotFound)
	}
	return res[0].Changed, nil
}

// ApplyBatch applies sigs in order inside tx (the consumer's transaction,
// which also records the events as processed) and returns what each did.
// Signals for orders that do not exist are skipped. Every change writes a
// history row; when an order reaches CONFIRMED or CANCELLED it appends
// order.confirmed / order.cancelled through events, caused by the
// signal's event (the sweeper's timeout has no cause); the caller writes
// what events collected in tx (the consumer's runner does).
//
// The consumer is on the saga's hot path and PostgreSQL's CPU is what
// limits it: applying events one by one cost two round trips per event
// (lock and read the order; update it with its history row), on top of a
// statement locking the batch's orders. A batch now costs two round
// trips however many events it has: one statement reads and locks every
// order it names, in id order (two partitions' batches meeting the same
// orders in opposite orders would otherwise deadlock); Go folds the
// signals through order.Next in offset order; one round trip writes each
// changed order's final status and every history row, in order. The rows
// stay locked until commit, so the fold sees what applying the signals
// one at a time would have seen, and an order that moves twice in a batch
// (RESERVED, then CONFIRMED) ends as it would have.
func ApplyBatch(ctx context.Context, tx pgx.Tx, events outbox.Emitter, sigs []Signal) ([]Outcome, error) {
	out := make([]Outcome, len(sigs))
	if len(sigs) == 0 {
		return out, nil
	}
	// Orders are keyed by their canonical spelling, the one PostgreSQL
	// returns, whatever spelling a signal came with.
	keys := make([]string, len(sigs))
	ids := make([]string, 0, len(sigs))
	seen := make(map[string]bool, len(sigs))
	for i, s := range sigs {
		id, err := uuid.Parse(s.OrderID)
		if err != nil {
			return nil, fmt.Errorf("order %q (%s event %s): %w", s.OrderID, s.Signal, s.EventID, err)
		}
		keys[i] = id.String()
		if !seen[keys[i]] {
			seen[keys[i]] = true
			ids = append(ids, keys[i])
		}
	}
	orders, err := lockOrders(ctx, tx, ids)
	if err != nil {
		return nil, err
	}

	var changed []string // order ids, in the order they first changed
	var history []historyRow
	var terminal []outbox.Event
	var moves []move
	for i, s := range sigs {
		id := keys[i]
		o, ok := orders[id]
		if !ok {
			continue
		}
		out[i].Found = true
		next, ok := order.Next(o.status, s.Signal)
		if !ok {
			continue
		}
		reason := s.Reason
		if next != order.StatusCancelled {
			reason = ""
		}
		if !o.changed {
			changed = append(changed, id)
		}
		moves = append(moves, move{from: o.status, to: next})
		o.status, o.reason, o.changed = next, reason, true
		out[i].Changed = true
		history = append(history, historyRow{orderID: id, status: next, reason: reason, eventID: s.EventID, eventType: string(s.Signal)})
		if ev, ok := terminalEvent(id, o, s); ok {
			terminal = append(terminal, ev)
		}
	}
	if len(changed) == 0 {
		return out, nil
	}
	if err := writeChanges(ctx, tx, orders, changed, history); err != nil {
		return nil, err
	}
	for _, ev := range terminal {
		if _, err := events.Emit(ev); err != nil {
			return nil, fmt.Errorf("order %s: %w", ev.AggregateID, err)
		}
	}
	countMoves(moves)
	return out, nil
}

// orderState is an order row as a batch reads and moves it.
type orderState struct {
	status   order.Status
	reason   string
	total    int64
	currency string
	flow     order.Flow
	changed  bool
}

// historyRow is one order_history row a batch writes.
type historyRow struct {
	orderID                    string
	status                     order.Status
	reason, eventID, eventType string
}

// lockOrders reads and locks the orders of ids (canonical spellings) in
// id order; ids with no order are left out.
func lockOrders(ctx context.Context, tx pgx.Tx, ids []string) (map[string]*orderState, error) {
	rows, err := tx.Query(ctx, `select id::text, status, total_amount, currency, flow from orders
		where id = any($1::uuid[]) order by id for update`, ids)
	if err != nil {
		return nil, fmt.Errorf("lock %d orders: %w", len(ids), err)
	}
	orders := make(map[string]*orderState, len(ids))
	var id, st, currency, flow string
	var total int64
	_, err = pgx.ForEachRow(rows, []any{&id, &st, &total, &currency, &flow}, func() error {
		orders[id] = &orderState{status: order.Status(st), total: total, currency: currency, flow: order.Flow(flow)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock %d orders: %w", len(ids), err)
	}
	return orders, nil
}

// terminalEvent is the event an order that reached o.status by s reports,
// if that status is terminal.
//
// An orchestrated order reports nothing: saga.finished already told
// everyone, and order.cancelled would start the choreographed
// compensations (inventory release, payment refund) of a saga whose own
// compensation has run.
func terminalEvent(id string, o *orderState, s Signal) (outbox.Event, bool) {
	var ev outbox.Event
	if o.flow == order.FlowOrchestrated {
		return ev, false
	}
	switch o.status {
	case order.StatusConfirmed:
		total := o.total
		ev = outbox.Event{Payload: contract.OrderConfirmedV1{OrderID: id, TotalAmount: &total, Currency: o.currency}}
	case order.StatusCancelled:
		ev = outbox.Event{Payload: contract.OrderCancelledV1{OrderID: id, Reason: o.reason}}
	default:
		return ev, false
	}
	ev.AggregateID, ev.CorrelationID = id, id
	if s.Signal != order.TimedOut {
		ev.CausationID = s.EventID
	}
	return ev, true
}

// writeChanges writes, in one round trip, the final status of each changed
// order and the history rows in the order the changes happened (their
// identity ids keep that order for readers). reason is kept only for
// CANCELLED; terminal_at is set when the final status is terminal.
func writeChanges(ctx context.Context, tx pgx.Tx, orders map[string]*orderState, changed []string, history []historyRow) error {
	statuses, reasons := make([]string, len(changed)), make([]string, len(changed))
	for i, id := range changed {
		statuses[i], reasons[i] = string(orders[id].status), orders[id].reason
	}
	hOrders, hStatuses, hReasons, hEvents, hTypes := make([]string, len(history)), make([]string, len(history)),
		make([]string, len(history)), make([]string, len(history)), make([]string, len(history))
	for i, h := range history {
		hOrders[i], hStatuses[i], hReasons[i], hEvents[i], hTypes[i] = h.orderID, string(h.status), h.reason, h.eventID, h.eventType
	}
	b := &pgx.Batch{}
	b.Queue(`update orders o set status = u.status, reason = nullif(u.reason, ''), updated_at = now(),
		terminal_at = case when u.status in ('CONFIRMED', 'CANCELLED') then now() end
		from unnest($1::uuid[], $2::text[], $3::text[]) as u(id, status, reason) where o.id = u.id`, changed, statuses, reasons)
	b.Queue(`insert into order_history (order_id, status, reason, event_id, event_type)
		select u.order_id, u.status, nullif(u.reason, ''), nullif(u.event_id, ''), u.event_type
		from unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[])
			with ordinality as u(order_id, status, reason, event_id, event_type, n)
		order by u.n`, hOrders, hStatuses, hReasons, hEvents, hTypes)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("update %d orders (first %s → %s): %w", len(changed), changed[0], statuses[0], err)
	}
	if tag.RowsAffected() != int64(len(changed)) {
		// The rows are locked by this transaction; this would be a bug.
		return fmt.Errorf("update of %d orders touched %d rows", len(changed), tag.RowsAffected())
	}
	if _, err := br.Exec(); err != nil {
		return historyErr(history, err)
	}
	return br.Close()
}

// historyErr names the order and event whose history row failed: the
// batch's only row, or the one a unique violation's detail names ("Key
// (event_id)=(…) already exists"). A repeated event is "already applied".
func historyErr(rows []historyRow, err error) error {
	var pe *pgconn.PgError
	unique := errors.As(err, &pe) && pe.Code == "23505"
	var h *historyRow
	if len(rows) == 1 {
		h = &rows[0]
	} else if unique {
		for i := range rows {
			if rows[i].eventID != "" && strings.Contains(pe.Detail, "("+rows[i].eventID+")") {
				h = &rows[i]
				break
			}
		}
	}
	switch {
	case h == nil:
		return fmt.Errorf("write %d order history rows: %w", len(rows), err)
	case unique:
		return fmt.Errorf("order %s → %s: order %s: event %s already applied: %w", h.orderID, h.status, h.orderID, h.eventID, err)
	default:
		return fmt.Errorf("order %s → %s: order %s history: %w", h.orderID, h.status, h.orderID, err)
	}
}
