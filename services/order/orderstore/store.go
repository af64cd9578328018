// Package orderstore stores orders and their history and applies the saga's
// signals to them, writing each resulting event to the outbox in the same
// transaction.
package orderstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/order"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which order migrations ran.
const VersionTable = "order_schema_version"

// Migrate creates or updates the order tables.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// Errors callers branch on.
var (
	ErrNotFound = errors.New("order not found")
	// ErrIdempotencyConflict: the Idempotency-Key was used before with
	// another request body.
	ErrIdempotencyConflict = errors.New("idempotency key already used with another request")
)

// Order is a stored order with its history.
type Order struct {
	ID              string         `json:"id"`
	CustomerID      string         `json:"customer_id"`
	Currency        string         `json:"currency"`
	TotalAmount     int64          `json:"total_amount"`
	Items           []order.Item   `json:"items"`
	ShippingAddress *order.Address `json:"shipping_address,omitempty"`
	PaymentMethod   string         `json:"payment_method"`
	Flow            order.Flow     `json:"flow"`
	Status          order.Status   `json:"status"`
	Reason          string         `json:"reason,omitempty"`
	CreatedAt       time.Time      `json:"created_at"`
	UpdatedAt       time.Time      `json:"updated_at"`
	History         []HistoryEntry `json:"history,omitempty"`
}

// HistoryEntry is one status an order went through.
type HistoryEntry struct {
	Status    order.Status `json:"status"`
	Reason    string       `json:"reason,omitempty"`
	EventType string       `json:"event_type"`
	EventID   string       `json:"event_id,omitempty"`
	At        time.Time    `json:"at"`
}

// Store reads and writes orders.
type Store struct {
	Pool *pgxpool.Pool
	// Outbox routes the events the store appends (its topic prefix); the
	// zero value uses the catalog's topics.
	Outbox outbox.Writer
}

func requestHash(r order.Request) string {
	b, _ := json.Marshal(r)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Create stores a validated request as a PENDING order and appends
// order.created v2 in the same transaction. With an idempotency key, a
// repeat of the same request returns the first order (created=false) and a
// different request under the same key is ErrIdempotencyConflict.
func (s *Store) Create(ctx context.Context, req order.Request, idemKey string) (o Order, created bool, err error) {
	if req.PaymentMethod == "" {
		req.PaymentMethod = order.DefaultPaymentMethod
	}
	if req.Flow == "" {
		req.Flow = order.FlowChoreographed
	}
	hash := requestHash(req)
	id := schemas.NewEventID() // a UUIDv7: time-ordered ids index well
	var key *string
	if idemKey != "" {
		key = &idemKey
	}
	items, _ := json.Marshal(req.Items)
	var addr []byte
	if req.ShippingAddress != nil {
		addr, _ = json.Marshal(req.ShippingAddress)
	}
	ev := contract.OrderCreatedV3{OrderID: id, CustomerID: req.CustomerID, Items: make([]contract.OrderCreatedV3Item, len(req.Items)),
		TotalAmount: req.Total(), Currency: req.Currency, PaymentMethod: req.PaymentMethod}
	for i, it := range req.Items {
		ev.Items[i] = contract.OrderCreatedV3Item(it)
	}
	if a := req.ShippingAddress; a != nil {
		addr := contract.OrderCreatedV3ShippingAddress(*a)
		ev.ShippingAddress = &addr
	}
	// A new order is one round trip: the order, its event and its history
	// row go as one batch, which PostgreSQL runs as one implicit
	// transaction (all or nothing, no BEGIN or COMMIT to wait for). It used
	// to take four, and eight before that: the POST path is on every
	// order's way, and on a small machine it spent its time waiting on the
	// wire and on pool connections. A reused idempotency key fails the
	// order's insert, which undoes the batch; only then is the first order
	// looked up.
	// An orchestrated order asks the orchestrator for its checkout instead
	// of announcing order.created, which would start the choreographed
	// one: the saga's id is the order's.
	var payload contract.Payload = ev
	if req.Flow == order.FlowOrchestrated {
		payload = checkoutRequest(ev)
	}
	b := &pgx.Batch{}
	b.Queue(`insert into orders (id, customer_id, currency, total_amount, items, shipping_address,
		payment_method, status, idempotency_key, request_hash, flow) values ($1, $2, $3, $4, $5, $6, $7, 'PENDING', $8, $9, $10)
		returning created_at, updated_at`,
		id, req.CustomerID, req.Currency, req.Total(), items, addr, req.PaymentMethod, key, hash, string(req.Flow)).QueryRow(func(row pgx.Row) error {
		// The rest of the answer is the request itself: reading back (and
		// decoding) the JSON just written would only cost time.
		return row.Scan(&o.CreatedAt, &o.UpdatedAt)
	})
	env, err := s.Outbox.Queue(b, outbox.Traced(ctx, outbox.Event{Payload: payload, AggregateID: id, CorrelationID: id}))
	if err != nil {
		return Order{}, false, fmt.Errorf("order %s: %w", id, err)
	}
	queueHistory(b, id, order.StatusPending, "", env.EventID, env.EventType)
	err = s.Pool.SendBatch(ctx, b).Close()
	var pe *pgconn.PgError
	switch {
	case err == nil:
		o.ID, o.CustomerID, o.Currency, o.TotalAmount = id, req.CustomerID, req.Currency, req.Total()
		o.Items, o.ShippingAddress, o.PaymentMethod, o.Status = req.Items, req.ShippingAddress, req.PaymentMethod, order.StatusPending
		o.Flow = req.Flow
		// The history row's time is the transaction's now(), as is the
		// order's created_at.
		o.History = []HistoryEntry{{Status: order.StatusPending, EventType: env.EventType, EventID: env.EventID, At: o.CreatedAt}}
		countMoves([]move{{to: order.StatusPending}})
		return o, true, nil
	case key != nil && errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "orders_idempotency_key_key":
		var prevID, prevHash string
		if err := s.Pool.QueryRow(ctx, `select id, request_hash from orders where idempotency_key = $1`, idemKey).Scan(&prevID, &prevHash); err != nil {
			return Order{}, false, fmt.Errorf("read order of idempotency key %q: %w", idemKey, err)
		}
		if prevHash != hash {
			return Order{}, false, fmt.Errorf("idempotency key %q (order %s): %w", idemKey, prevID, ErrIdempotencyConflict)
		}
		o, err = s.Get(ctx, prevID)
		return o, false, err
	default:
		return Order{}, false, fmt.Errorf("store order %s: %w", id, err)
	}
}

// checkoutRequest is the orchestrated checkout's request for the order ev
// announces.
func checkoutRequest(ev contract.OrderCreatedV3) contract.SagaCheckoutRequestedV1 {
	r := contract.SagaCheckoutRequestedV1{SagaID: ev.OrderID, OrderID: ev.OrderID, CustomerID: ev.CustomerID, TotalAmount: ev.TotalAmount,
		Currency: ev.Currency, PaymentMethod: ev.PaymentMethod, Items: make([]contract.SagaCheckoutRequestedV1Item, len(ev.Items))}
	for i, it := range ev.Items {
		r.Items[i] = contract.SagaCheckoutRequestedV1Item(it)
	}
	if a := ev.ShippingAddress; a != nil {
		addr := contract.SagaCheckoutRequestedV1ShippingAddress(*a)
		r.ShippingAddress = &addr
	}
	return r
}

func queueHistory(b *pgx.Batch, id string, st order.Status, reason, eventID, eventType string) {
	var ev *string
	if eventID != "" {
		ev = &eventID
	}
	b.Queue(`insert into order_history (order_id, status, reason, event_id, event_type) values ($1, $2, nullif($3, ''), $4, $5)`,
		id, string(st), reason, ev, eventType)
}

const orderCols = `id::text, customer_id, currency, total_amount, items, shipping_address, payment_method, flow, status,
	coalesce(reason, ''), created_at, updated_at`

func scanHistory(r pgx.CollectableRow) (HistoryEntry, error) {
	var h HistoryEntry
	var st string
	err := r.Scan(&st, &h.Reason, &h.EventType, &h.EventID, &h.At)
	h.Status = order.Status(st)
	return h, err
}

func scanOrder(row pgx.Row) (Order, error) {
	var o Order
	var items, addr []byte
	var st, flow string
	if err := row.Scan(&o.ID, &o.CustomerID, &o.Currency, &o.TotalAmount, &items, &addr, &o.PaymentMethod, &flow, &st,
		&o.Reason, &o.CreatedAt, &o.UpdatedAt); err != nil {
		return Order{}, err
	}
	o.Status, o.Flow = order.Status(st), order.Flow(flow)
	if err := json.Unmarshal(items, &o.Items); err != nil {
		return Order{}, fmt.Errorf("order %s items: %w", o.ID, err)
	}
	if len(addr) > 0 {
		o.ShippingAddress = new(order.Address)
		if err := json.Unmarshal(addr, o.ShippingAddress); err != nil {
			return Order{}, fmt.Errorf("order %s address: %w", o.ID, err)
		}
	}
	return o, nil
}

// Get reads an order with its history.
func (s *Store) Get(ctx context.Context, id string) (Order, error) {
	o, err := scanOrder(s.Pool.QueryRow(ctx, `select `+orderCols+` from orders where id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, fmt.Errorf("order %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Order{}, fmt.Errorf("read order %s: %w", id, err)
	}
	rows, err := s.Pool.Query(ctx, `select status, coalesce(reason, ''), event_type, coalesce(event_id, ''), at
		from order_history where order_id = $1 order by id`, id)
	if err != nil {
		return Order{}, fmt.Errorf("read history of order %s: %w", id, err)
	}
	o.History, err = pgx.CollectRows(rows, scanHistory)
	if err != nil {
		return Order{}, fmt.Errorf("read history of order %s: %w", id, err)
	}
	return o, nil
}

// List returns up to limit orders, newest first, optionally of one status
// and of one customer ("" for any).
func (s *Store) List(ctx context.Context, status order.Status, customerID string, limit int) ([]Order, error) {
	rows, err := s.Pool.Query(ctx, `select `+orderCols+` from orders where ($1 = '' or status = $1)
		and ($3 = '' or customer_id = $3) order by created_at desc, id desc limit $2`, string(status), limit, customerID)
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Order, error) { return scanOrder(r) })
	if err != nil {
		return nil, fmt.Errorf("list orders: %w", err)
	}
	return out, nil
}

// CancelStuck cancels up to limit choreographed orders that have been in
// flight longer than maxAge, reason timeout, and returns how many it
// cancelled. Orchestrated orders are the orchestrator's: its step
// timeouts end every saga, and cancelling here would contradict a saga
// that is about to complete. Rows
// another transaction holds (a payment landing right now) are skipped and
// looked at again on the next sweep.
func (s *Store) CancelStuck(ctx context.Context, maxAge time.Duration, limit int) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `select id::text from orders where status in ('PENDING', 'RESERVED') and flow = 'choreographed'
			and created_at < now() - make_interval(secs => $1) order by created_at limit $2 for update skip locked`,
			maxAge.Seconds(), limit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		// One ApplyBatch for the whole sweep: a stalled saga leaves many
		// orders stuck at once, and each cost four round trips alone.
		sigs := make([]Signal, len(ids))
		for i, id := range ids {
			sigs[i] = Signal{OrderID: id, Signal: order.TimedOut, Reason: order.ReasonTimeout}
		}
		return s.Outbox.Emitting(ctx, tx, func(events outbox.Emitter) error {
			out, err := ApplyBatch(ctx, tx, events, sigs)
			for _, o := range out {
				if o.Changed {
					n++
				}
			}
			return err
		})
	})
	if err != nil {
		return 0, fmt.Errorf("cancel stuck orders: %w", err)
	}
	return n, nil
}

// Sweeper cancels stuck orders periodically: the saga's backstop when an
// event never comes (a participant is down for long, a payment never
// settles).
type Sweeper struct {
	Store    *Store
	MaxAge   time.Duration
	Interval time.Duration
	Log      interface {
		Info(msg string, args ...any)
		Warn(msg string, args ...any)
	}
}

// Run sweeps every Interval until ctx is done.
func (s *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		for {
			n, err := s.Store.CancelStuck(ctx, s.MaxAge, 100)
			if err != nil {
				if ctx.Err() == nil {
					s.Log.Warn("sweep stuck orders", "err", err)
				}
				break
			}
			if n > 0 {
				s.Log.Info("cancelled stuck orders", "count", n, "stuck_after", s.MaxAge)
			}
			if n < 100 {
				break
			}
		}
	}
}
