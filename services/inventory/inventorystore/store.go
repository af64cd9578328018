// Package inventorystore keeps stock and reservations in PostgreSQL and applies
// the inventory rules inside the consumer's transaction, appending the
// resulting event to the outbox in the same transaction.
package inventorystore

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/internal/contradiction"
	"github.com/concordhq/concord/services/inventory"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which inventory migrations ran.
const VersionTable = "inventory_schema_version"

// Migrate creates or updates the inventory tables.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// Release reasons; the order service shows them as its cancellation reason.
const (
	ReasonPaymentDeclined = "payment_declined"
	ReasonOrderCancelled  = "order_cancelled"
	ReasonOutOfStock      = "out_of_stock"
	ReasonSagaCompensated = "saga_compensated" // inventory.release_stock
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
// inventory.reserved or inventory.rejected; see ApplyBatch. A second call
// for the same order does nothing and returns the existing status.
func Reserve(ctx context.Context, tx pgx.Tx, events outbox.Emitter, r ReserveRequest) (inventory.Status, error) {
	out, err := ApplyBatch(ctx, tx, events, []Op{{Reserve: &r}})
	if err != nil {
		return "", err
	}
	return out[0].Status, nil
}

// Apply moves an order's reservation on a commit or release, inside tx,
// guarded by the reservation's status (see inventory.Decide). A release
// appends inventory.released with reason. An order with no reservation
// (its order.created was never seen or it was rejected) is left alone.
func Apply(ctx context.Context, tx pgx.Tx, events outbox.Emitter, orderID string, a inventory.Action, reason, causationID string) (bool, error) {
	out, err := ApplyBatch(ctx, tx, events, []Op{{OrderID: orderID, Action: a, Reason: reason, CausationID: causationID}})
	if err != nil {
		return false, err
	}
	return out[0].Changed, nil
}

// Op is one saga event's request: a reservation when Reserve is set,
// otherwise Action (commit or release) on OrderID's reservation, with the
// release's Reason.
//
// Check names the choreographed event the op comes from (order.confirmed,
// payment.processed, payment.failed, order.cancelled): before it moves
// stock it is checked against what the service knows of the order
// (inventory.Check), and one that contradicts it moves nothing and is
// recorded in refused_events with its reason (Data is the event's data).
// order.confirmed has no Action: it only notes the confirmation.
//
// Command is set for the orchestrated saga's commands (reserve_stock,
// release_stock): the op then answers with saga.step_replied instead of
// the choreographed events (inventory.reserved, rejected, released), which
// the choreographed services must not see for an orchestrated order.
type Op struct {
	Reserve     *ReserveRequest
	OrderID     string
	Action      inventory.Action
	Reason      string
	CausationID string
	Command     *SagaCommand
	Check       inventory.Event
	Data        json.RawMessage
}

// Service is the service label of the refusals the store records.
const Service = "inventory-svc"

// SagaCommand is the orchestrated saga's command an Op applies.
type SagaCommand struct {
	SagaID, Step, Key string
	Type              contract.Type
	// ID is the command's event id: the reply answers it.
	ID string
}

// Reasons a saga command is refused.
const (
	// ReasonReleasedBeforeReserved: the saga released this order's stock
	// before the reservation arrived; the late reservation is refused.
	ReasonReleasedBeforeReserved = "released_before_reserved"
)

// reply emits the saga reply to c for order orderID.
func reply(events outbox.Emitter, c *SagaCommand, orderID string, ok bool, reason string) error {
	r := contract.SagaStepRepliedV1{SagaID: c.SagaID, Step: c.Step, CommandType: contract.SagaStepRepliedV1CommandType(c.Type),
		CommandID: c.ID, IdempotencyKey: c.Key, Outcome: contract.SagaStepRepliedV1OutcomeSucceeded}
	if !ok {
		r.Outcome, r.Reason = contract.SagaStepRepliedV1OutcomeFailed, reason
	}
	if _, err := events.Emit(outbox.Event{Payload: r, AggregateID: c.SagaID, CorrelationID: orderID, CausationID: c.ID}); err != nil {
		return fmt.Errorf("saga %s %s reply: %w", c.SagaID, c.Type, err)
	}
	return nil
}

// Outcome is what an Op did: a reservation's status (the existing one for
// a repeated order.created), or whether a commit or release moved stock.
type Outcome struct {
	Status  inventory.Status
	Changed bool
}

// reservation is a reservation row as a batch sees and changes it.
type reservation struct {
	id      string
	status  inventory.Status
	lines   []inventory.Line
	reason  string // the latest non-empty reason set in this batch
	sagaKey string // the saga command that created it, if any
	sagaCmd string // and that command's event id
	// confirmed: order-svc confirmed the order (order.confirmed).
	confirmed bool
	isNew     bool // inserted at the end of the batch
	dirty     bool // an existing row whose status changed
}

// ApplyBatch applies ops in order inside tx and emits their events
// (inventory.reserved / rejected / released) through events, which the
// caller writes in tx (the consumer's runner does).
//
// A consumer batch used to cost three round trips per event, each holding
// hot stock rows locked while waiting for the next; the service spent its
// time on the wire. Now a batch costs a fixed handful: it locks the
// reservations of the orders it names (by order id) and then the stock
// rows of every SKU involved (by SKU, the order every writer locks them
// in, so batches never deadlock), decides every op in Go against those
// locked rows with inventory.Ledger and inventory.Decide, and writes the
// stock changes and reservation rows in three set-based statements sent
// together. Since the rows stay locked until commit, what Go decided is
// what the rows hold: a reservation is all-or-nothing and available never
// goes negative (the table's checks would refuse it anyway), and each op
// sees what the earlier ones of the batch left, as if they had run one by
// one. A reservation's status still guards its commit and release.
func ApplyBatch(ctx context.Context, tx pgx.Tx, events outbox.Emitter, ops []Op) ([]Outcome, error) {
	// Normalize each reservation's lines first; collect the orders named.
	reserveLines := make([][]inventory.Line, len(ops))
	var orderIDs []string
	seen := make(map[string]bool, len(ops))
	for i, op := range ops {
		id := op.OrderID
		if op.Reserve != nil {
			id = op.Reserve.OrderID
			lines, err := inventory.Normalize(op.Reserve.Lines)
			if err != nil {
				return nil, fmt.Errorf("order %s: %w", id, err)
			}
			reserveLines[i] = lines
		}
		if !seen[id] {
			seen[id] = true
			orderIDs = append(orderIDs, id)
		}
	}

	// Lock the existing reservations; q.oid keeps the caller's spelling of
	// the order id, so the map lookups below match it.
	byOrder := make(map[string]*reservation, len(orderIDs))
	rows, err := tx.Query(ctx, `select q.oid, r.id::text, r.status, r.lines, coalesce(r.reason, ''), coalesce(r.saga_key, ''),
			coalesce(r.saga_command_id, ''), r.order_confirmed
		from unnest($1::text[]) as q(oid) join reservations r on r.order_id = q.oid::uuid
		order by r.order_id for update of r`, orderIDs)
	if err != nil {
		return nil, fmt.Errorf("lock reservations of %d orders: %w", len(orderIDs), err)
	}
	for rows.Next() {
		var oid, id, st, reason, sagaKey, sagaCmd string
		var linesJSON []byte
		var confirmed bool
		if err := rows.Scan(&oid, &id, &st, &linesJSON, &reason, &sagaKey, &sagaCmd, &confirmed); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read reservations: %w", err)
		}
		res := &reservation{id: id, status: inventory.Status(st), reason: reason, sagaKey: sagaKey, sagaCmd: sagaCmd, confirmed: confirmed}
		if err := json.Unmarshal(linesJSON, &res.lines); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reservation %s lines: %w", id, err)
		}
		byOrder[oid] = res
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock reservations of %d orders: %w", len(orderIDs), err)
	}

	// Lock the stock of every SKU the batch may move.
	skuSet := make(map[string]bool)
	for _, lines := range reserveLines {
		for _, l := range lines {
			skuSet[l.SKU] = true
		}
	}
	for _, res := range byOrder {
		for _, l := range res.lines {
			skuSet[l.SKU] = true
		}
	}
	skus := make([]string, 0, len(skuSet))
	for sku := range skuSet {
		skus = append(skus, sku)
	}
	ledger, err := lockStock(ctx, tx, skus)
	if err != nil {
		return nil, err
	}
	before := make(inventory.Ledger, len(ledger))
	for sku, b := range ledger {
		before[sku] = b
	}

	// Decide every op in order.
	out := make([]Outcome, len(ops))
	var created []*reservation
	var createdOrders []string
	var outcomes []string // for the reservations counter
	var refusals []contradiction.Refusal
	for i, op := range ops {
		if op.Reserve != nil {
			r := op.Reserve
			if res, ok := byOrder[r.OrderID]; ok {
				out[i].Status = res.status // a repeated order.created or reserve_stock
				if op.Command != nil {
					// Answer the repeat as the first time.
					okay, reason := res.status == inventory.StatusHeld || res.status == inventory.StatusCommitted, res.reason
					if res.status == inventory.StatusReleased && len(res.lines) == 0 {
						reason = ReasonReleasedBeforeReserved
					}
					first := *op.Command
					if res.sagaCmd != "" { // made by an earlier reserve_stock: name that command
						first.ID = res.sagaCmd
					}
					if err := reply(events, &first, r.OrderID, okay, reason); err != nil {
						return nil, err
					}
				}
				outcomes = append(outcomes, "duplicate")
				continue
			}
			lines := reserveLines[i]
			res := &reservation{id: schemas.NewEventID(), status: inventory.StatusHeld, lines: lines, isNew: true}
			short := ledger.Reserve(lines)
			if len(short) > 0 {
				res.status, res.reason = inventory.StatusRejected, ReasonOutOfStock
			}
			byOrder[r.OrderID] = res
			created = append(created, res)
			createdOrders = append(createdOrders, r.OrderID)
			out[i].Status = res.status
			outcomes = append(outcomes, strings.ToLower(string(res.status)))
			if op.Command != nil {
				res.sagaKey, res.sagaCmd = op.Command.Key, op.Command.ID
				if err := reply(events, op.Command, r.OrderID, len(short) == 0, res.reason); err != nil {
					return nil, err
				}
				continue
			}
			ev := outbox.Event{AggregateID: r.OrderID, CorrelationID: r.OrderID, CausationID: r.CausationID}
			if len(short) > 0 {
				ev.Payload = contract.InventoryRejectedV1{OrderID: r.OrderID, Reason: res.reason, SKUs: short}
			} else {
				items := make([]contract.InventoryReservedV2Item, len(lines))
				for i, l := range lines {
					items[i] = contract.InventoryReservedV2Item(l)
				}
				amount := r.Amount
				ev.Payload = contract.InventoryReservedV2{OrderID: r.OrderID, ReservationID: res.id, Items: items,
					Amount: &amount, Currency: r.Currency, CustomerID: r.CustomerID, PaymentMethod: r.PaymentMethod}
			}
			if _, err := events.Emit(ev); err != nil {
				return nil, fmt.Errorf("order %s: %w", r.OrderID, err)
			}
			continue
		}
		res, ok := byOrder[op.OrderID]
		if op.Command == nil && op.Check != "" {
			// A choreographed event: check it against what is known of
			// the order before it moves anything.
			k := inventory.Known{Reserved: ok}
			if ok {
				k.Status, k.Confirmed, k.Orchestrated = res.status, res.confirmed, res.sagaKey != "" || res.sagaCmd != ""
			}
			if reason, bad := inventory.Check(k, op.Check); bad {
				refusals = append(refusals, contradiction.Refusal{Service: Service, EventID: op.CausationID, EventType: string(op.Check),
					OrderID: op.OrderID, Reason: reason, Detail: refusalDetail(k, op.Check), Data: op.Data})
				continue
			}
			if op.Check == inventory.OrderConfirmed {
				if ok && !res.confirmed {
					res.confirmed = true
					if !res.isNew {
						res.dirty = true
					}
				}
				continue
			}
		}
		if !ok && op.Command != nil && op.Action == inventory.Release {
			// Released before reserved: a tombstone refuses the late
			// reservation.
			res = &reservation{id: schemas.NewEventID(), status: inventory.StatusReleased, lines: []inventory.Line{}, reason: op.Reason,
				isNew: true, sagaKey: op.Command.Key}
			byOrder[op.OrderID] = res
			created = append(created, res)
			createdOrders = append(createdOrders, op.OrderID)
		}
		if !ok {
			if op.Command != nil {
				if err := reply(events, op.Command, op.OrderID, true, ""); err != nil {
					return nil, err
				}
			}
			continue // no reservation: nothing to commit or release
		}
		next, move, ok := inventory.Decide(res.status, op.Action)
		if !ok {
			if op.Command != nil { // nothing left to release: done
				if err := reply(events, op.Command, op.OrderID, true, ""); err != nil {
					return nil, err
				}
			}
			continue // already done, too late, or never held stock
		}
		if err := ledger.Move(res.lines, move); err != nil {
			// The reservation and the stock disagree; retrying cannot help.
			return nil, idempotent.Permanent(fmt.Errorf("reservation %s (order %s) → %s: %w", res.id, op.OrderID, next, err))
		}
		res.status = next
		if op.Reason != "" {
			res.reason = op.Reason
		}
		if !res.isNew {
			res.dirty = true
		}
		out[i].Changed = true
		outcomes = append(outcomes, strings.ToLower(string(next)))
		if op.Command != nil {
			if err := reply(events, op.Command, op.OrderID, true, ""); err != nil {
				return nil, err
			}
			continue
		}
		if next == inventory.StatusReleased {
			_, err := events.Emit(outbox.Event{AggregateID: op.OrderID, CorrelationID: op.OrderID, CausationID: op.CausationID,
				Payload: contract.InventoryReleasedV1{OrderID: op.OrderID, ReservationID: res.id, Reason: op.Reason}})
			if err != nil {
				return nil, fmt.Errorf("order %s: %w", op.OrderID, err)
			}
		}
	}
	if err := writeBatch(ctx, tx, before, ledger, created, createdOrders, byOrder); err != nil {
		return nil, err
	}
	if err := contradiction.Record(ctx, tx, refusals...); err != nil {
		return nil, err
	}
	countOutcomes(outcomes)
	return out, nil
}

// lockStock locks the given SKUs' stock rows in SKU order and returns
// them; SKUs with no row are left out.
func lockStock(ctx context.Context, tx pgx.Tx, skus []string) (inventory.Ledger, error) {
	ledger := make(inventory.Ledger, len(skus))
	if len(skus) == 0 {
		return ledger, nil
	}
	rows, err := tx.Query(ctx, `select sku, available, reserved, committed from stock
		where sku = any($1::text[]) order by sku for update`, skus)
	if err != nil {
		return nil, fmt.Errorf("lock stock of %d SKUs: %w", len(skus), err)
	}
	var sku string
	var b inventory.Buckets
	_, err = pgx.ForEachRow(rows, []any{&sku, &b.Available, &b.Reserved, &b.Committed}, func() error {
		ledger[sku] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock stock of %d SKUs: %w", len(skus), err)
	}
	return ledger, nil
}

// writeBatch writes what ApplyBatch decided in one round trip: the stock
// differences (as increments, on rows this transaction holds locked), the
// new reservations in creation order, and the status changes of existing
// ones.
func writeBatch(ctx context.Context, tx pgx.Tx, before, after inventory.Ledger, created []*reservation, createdOrders []string,
	byOrder map[string]*reservation) error {
	b := &pgx.Batch{}
	var skus []string
	var da, dr, dc []int64
	for sku, a := range after {
		p := before[sku]
		if a != p {
			skus = append(skus, sku)
			da, dr, dc = append(da, a.Available-p.Available), append(dr, a.Reserved-p.Reserved), append(dc, a.Committed-p.Committed)
		}
	}
	stockQ := -1
	if len(skus) > 0 {
		stockQ = b.Len()
		b.Queue(`update stock s set available = s.available + u.da, reserved = s.reserved + u.dr, committed = s.committed + u.dc, updated_at = now()
			from unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) as u(sku, da, dr, dc) where s.sku = u.sku`, skus, da, dr, dc)
	}
	if len(created) > 0 {
		n := len(created)
		ids, statuses, lines, reasons, keys, cmds := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n),
			make([]string, n)
		confirmed := make([]bool, n)
		for i, res := range created {
			lj, _ := json.Marshal(res.lines)
			ids[i], statuses[i], lines[i], reasons[i], keys[i], cmds[i] = res.id, string(res.status), string(lj), res.reason, res.sagaKey, res.sagaCmd
			confirmed[i] = res.confirmed
		}
		b.Queue(`insert into reservations (id, order_id, status, lines, reason, saga_key, saga_command_id, order_confirmed)
			select u.id::uuid, u.oid::uuid, u.st, u.ln::jsonb, nullif(u.rs, ''), nullif(u.k, ''), nullif(u.c, ''), u.conf
			from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bool[])
				with ordinality as u(id, oid, st, ln, rs, k, c, conf, n) order by u.n`,
			ids, createdOrders, statuses, lines, reasons, keys, cmds, confirmed)
	}
	var ids, statuses, reasons []string
	var confirmed []bool
	for _, res := range byOrder {
		if res.dirty {
			ids, statuses, reasons = append(ids, res.id), append(statuses, string(res.status)), append(reasons, res.reason)
			confirmed = append(confirmed, res.confirmed)
		}
	}
	if len(ids) > 0 {
		b.Queue(`update reservations r set status = u.st, reason = coalesce(nullif(u.rs, ''), r.reason), order_confirmed = u.conf, updated_at = now()
			from unnest($1::text[], $2::text[], $3::text[], $4::bool[]) as u(id, st, rs, conf) where r.id = u.id::uuid`,
			ids, statuses, reasons, confirmed)
	}
	if b.Len() == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	for i := range b.Len() {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("write batch (%d stock rows, %d new and %d changed reservations): %w", len(skus), len(created), len(ids), err)
		}
		if i == stockQ && tag.RowsAffected() != int64(len(skus)) {
			return fmt.Errorf("stock update touched %d of %d SKUs", tag.RowsAffected(), len(skus))
		}
	}
	return br.Close()
}

// refusalDetail says what a refused event contradicted.
func refusalDetail(k inventory.Known, e inventory.Event) string {
	if !k.Reserved {
		return fmt.Sprintf("%s for an order inventory-svc holds no reservation for (no order.created seen)", e)
	}
	what := fmt.Sprintf("reservation %s", k.Status)
	if k.Confirmed {
		what += ", order confirmed"
	}
	if k.Orchestrated {
		what += ", made by the orchestrated saga"
	}
	return fmt.Sprintf("%s for an order whose %s: no stock moved", e, what)
}
