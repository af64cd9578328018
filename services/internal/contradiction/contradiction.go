// Package contradiction records the events a saga consumer refuses because
// they contradict what its service already knows (a reservation for an
// order never created, a cancellation of a confirmed order, …): the
// service moves no money and no stock on them, writes each to its
// refused_events table with its reason, in the consumer's transaction, and
// counts it in concord_contradicting_events_total. Every refused_events
// row is a review entry until a person resolves it.
//
// The decisions themselves are the services' pure functions
// (payment.CheckReservation, inventory.Check); this package only writes
// what they decided. Each service's store creates the table in its own
// migrations with the columns Record writes.
package contradiction

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
)

// Refusal is one refused event.
type Refusal struct {
	// Service is the refusing service (payment-svc, inventory-svc): the
	// service label of the counter.
	Service   string
	EventID   string
	EventType string
	OrderID   string
	// Reason is the decision's reason constant (unknown_order,
	// order_confirmed, …); Detail says what contradicted what.
	Reason string
	Detail string
	// Data is the event's data as received, for the reviewer.
	Data json.RawMessage
}

// events counts refusals once each (a redelivered event is not counted
// again). Counted when the row is written, before its transaction
// commits: a transaction that then rolls back and is retried counts again.
var events = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "concord_contradicting_events_total",
	Help: "Events a consumer refused because they contradict what its service knows (no money or stock moved), by service, event type and reason.",
}, []string{"service", "type", "reason"})

// RegisterMetrics registers the counter on reg; a second registration on
// the same registry is a no-op.
func RegisterMetrics(reg prometheus.Registerer) error {
	err := reg.Register(events)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		return nil
	}
	return err
}

// Record writes refusals to refused_events inside tx, in one statement,
// and counts those not recorded before (the event id is unique: a refusal
// recorded again changes nothing).
func Record(ctx context.Context, tx pgx.Tx, refusals ...Refusal) error {
	if len(refusals) == 0 {
		return nil
	}
	n := len(refusals)
	ids, types, orders, reasons, details, data := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]string, n), make([]string, n)
	for i, r := range refusals {
		d := r.Data
		if !json.Valid(d) {
			d = json.RawMessage("null")
		}
		ids[i], types[i], orders[i], reasons[i], details[i], data[i] = r.EventID, r.EventType, r.OrderID, r.Reason, r.Detail, string(d)
	}
	rows, err := tx.Query(ctx, `insert into refused_events (event_id, event_type, order_id, reason, detail, data)
		select u.id::uuid, u.typ, u.oid, u.reason, u.detail, u.data::jsonb
		from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) with ordinality
			as u(id, typ, oid, reason, detail, data, n)
		order by u.n
		on conflict (event_id) do nothing
		returning event_id::text`, ids, types, orders, reasons, details, data)
	if err != nil {
		return fmt.Errorf("record %d refused events: %w", n, err)
	}
	recorded, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("record %d refused events: %w", n, err)
	}
	fresh := make(map[string]bool, len(recorded))
	for _, id := range recorded {
		fresh[id] = true
	}
	for _, r := range refusals {
		if id := strings.ToLower(r.EventID); fresh[id] {
			delete(fresh, id)
			events.WithLabelValues(r.Service, r.EventType, r.Reason).Inc()
		}
	}
	return nil
}

// Open is one unresolved refused_events row.
type Open struct {
	ID        int64
	EventID   string
	EventType string
	OrderID   string
	Reason    string
	Detail    string
}

// Querier is what List reads through (a pool or a transaction).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// List returns the unresolved refusals of orderID ("" for every order),
// oldest first.
func List(ctx context.Context, q Querier, orderID string) ([]Open, error) {
	rows, err := q.Query(ctx, `select id, event_id::text, event_type, order_id, reason, detail from refused_events
		where resolved_at is null and ($1 = '' or order_id = $1) order by id`, orderID)
	if err != nil {
		return nil, fmt.Errorf("list refused events: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Open])
}

// ErrNotOpen is Resolve's error for an id that names no unresolved refusal.
var ErrNotOpen = errors.New("no open refused event with that id")

// Execer is what Resolve writes through.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Resolve closes the review of refusal id with who resolved it and what
// was done.
func Resolve(ctx context.Context, e Execer, id int64, by, note string) error {
	if by == "" || note == "" {
		return errors.New("resolving a refused event needs who and a note")
	}
	tag, err := e.Exec(ctx, `update refused_events set resolved_at = now(), resolved_by = $2, note = $3
		where id = $1 and resolved_at is null`, id, by, note)
	if err != nil {
		return fmt.Errorf("resolve refused event %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("refused event %d: %w", id, ErrNotOpen)
	}
	return nil
}
