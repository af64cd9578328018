// Package shippingstore keeps the shipping service's shipments in
// PostgreSQL. Every change loads the row under its lock, applies one of
// the domain's transitions (package shipping) and saves the row with the
// replies the transition owes appended to the outbox in the same
// transaction: a reply exists if and only if the state it reports
// committed.
package shippingstore

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/shipping"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which shipping migrations ran.
const VersionTable = "shipping_schema_version"

// Migrate creates or updates the shipping tables.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// Row is a stored shipment.
type Row struct {
	ID int64
	shipping.Shipment
	Attempts  int
	LastError string
}

const cols = `id, idempotency_key, saga_id, order_id, parcel, status, coalesce(carrier_shipment_id, ''), coalesce(tracking_number, ''), create_calls,
	coalesce(create_command_id, ''), coalesce(create_step, ''), create_deadline, create_outcome, coalesce(create_reason, ''), create_retryable,
	coalesce(cancel_key, ''), coalesce(cancel_command_id, ''), coalesce(cancel_step, ''), cancel_deadline, coalesce(cancel_status, ''), cancel_internal,
	cancel_outcome, coalesce(cancel_reason, ''), cancel_retryable, attempts, coalesce(last_error, '')`

func scan(r pgx.Row) (Row, error) {
	var (
		row                        Row
		s                          = &row.Shipment
		parcel                     []byte
		createDL, cancelDL         *time.Time
		createOut, cancelOut       *string
		createReason, cancelReason string
		createRetry, cancelRetry   bool
		status, cancelStatus       string
	)
	err := r.Scan(&row.ID, &s.Key, &s.SagaID, &s.OrderID, &parcel, &status, &s.CarrierID, &s.TrackingNumber, &s.CreateCalls,
		&s.Create.CommandID, &s.Create.Step, &createDL, &createOut, &createReason, &createRetry,
		&s.Cancel.Key, &s.Cancel.CommandID, &s.Cancel.Step, &cancelDL, &cancelStatus, &s.InternalCancel,
		&cancelOut, &cancelReason, &cancelRetry, &row.Attempts, &row.LastError)
	if err != nil {
		return Row{}, err
	}
	s.Status, s.CancelStatus = shipping.Status(status), shipping.CancelStatus(cancelStatus)
	if parcel != nil {
		if err := json.Unmarshal(parcel, &s.Parcel); err != nil {
			return Row{}, fmt.Errorf("shipment %d: parcel: %w", row.ID, err)
		}
	}
	if s.Create.CommandID != "" {
		s.Create.Key = s.Key
	}
	if createDL != nil {
		s.Create.Deadline = *createDL
	}
	if cancelDL != nil {
		s.Cancel.Deadline = *cancelDL
	}
	if createOut != nil {
		s.Create.Answer = &shipping.Answer{Outcome: shipping.Outcome(*createOut), Reason: createReason, Retryable: createRetry}
	}
	if cancelOut != nil {
		s.Cancel.Answer = &shipping.Answer{Outcome: shipping.Outcome(*cancelOut), Reason: cancelReason, Retryable: cancelRetry}
	}
	return row, nil
}

func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func answerCols(a *shipping.Answer) (outcome *string, reason *string, retryable bool) {
	if a == nil {
		return nil, nil, false
	}
	o := string(a.Outcome)
	return &o, nullIfEmpty(a.Reason), a.Retryable
}

// save writes s over row id and queues the worker: due now when the
// domain has something to do, idle otherwise. A command (release false)
// that makes a row due while an attempt holds its lease leaves it due when
// the lease ends: a second attempt beside the one in flight could look the
// key up before the first call lands, and settle a shipment as never
// created that the carrier is creating. The lease holder releases it
// (release true) when it records what the carrier said.
func save(ctx context.Context, tx pgx.Tx, id int64, s *shipping.Shipment, now time.Time, release bool) error {
	var parcel []byte
	if s.Create.CommandID != "" {
		var err error
		if parcel, err = json.Marshal(s.Parcel); err != nil {
			return fmt.Errorf("shipment %s: parcel: %w", s.Key, err)
		}
	}
	var next *time.Time
	if shipping.Next(s.State(), now) != shipping.Wait {
		next = &now
	}
	co, cr, crt := answerCols(s.Create.Answer)
	xo, xr, xrt := answerCols(s.Cancel.Answer)
	_, err := tx.Exec(ctx, `update shipments set saga_id = $2, order_id = $3, parcel = $4, status = $5, carrier_shipment_id = $6,
		tracking_number = $7, create_calls = $8, create_command_id = $9, create_step = $10, create_deadline = $11,
		create_outcome = $12, create_reason = $13, create_retryable = $14, cancel_key = $15, cancel_command_id = $16,
		cancel_step = $17, cancel_deadline = $18, cancel_status = $19, cancel_internal = $20, cancel_outcome = $21,
		cancel_reason = $22, cancel_retryable = $23, leased_until = case when $25 then null else leased_until end,
		next_attempt_at = case when $24::timestamptz is null then null else greatest($24, case when $25 then null else leased_until end) end, updated_at = now()
		where id = $1`,
		id, s.SagaID, s.OrderID, parcel, string(s.Status), nullIfEmpty(s.CarrierID), nullIfEmpty(s.TrackingNumber), s.CreateCalls,
		nullIfEmpty(s.Create.CommandID), nullIfEmpty(s.Create.Step), nullTime(s.Create.Deadline), co, cr, crt,
		nullIfEmpty(s.Cancel.Key), nullIfEmpty(s.Cancel.CommandID), nullIfEmpty(s.Cancel.Step), nullTime(s.Cancel.Deadline),
		nullIfEmpty(string(s.CancelStatus)), s.InternalCancel, xo, xr, xrt, next, release)
	if err != nil {
		return fmt.Errorf("save shipment %s: %w", s.Key, err)
	}
	return nil
}

// insert stores a new row (its columns are then written by save).
func insert(ctx context.Context, tx pgx.Tx, s *shipping.Shipment, now time.Time) (int64, bool, error) {
	var id int64
	err := tx.QueryRow(ctx, `insert into shipments (idempotency_key, saga_id, order_id, status) values ($1, $2, $3, $4)
		on conflict (idempotency_key) do nothing returning id`, s.Key, s.SagaID, s.OrderID, string(s.Status)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store shipment %s: %w", s.Key, err)
	}
	return id, true, save(ctx, tx, id, s, now, false)
}

func lockByKey(ctx context.Context, tx pgx.Tx, key string) (Row, error) {
	row, err := scan(tx.QueryRow(ctx, `select `+cols+` from shipments where idempotency_key = $1 for update`, key))
	if err != nil {
		return Row{}, fmt.Errorf("lock shipment %s: %w", key, err)
	}
	return row, nil
}

func lockByID(ctx context.Context, tx pgx.Tx, id int64) (Row, error) {
	row, err := scan(tx.QueryRow(ctx, `select `+cols+` from shipments where id = $1 for update`, id))
	if err != nil {
		return Row{}, fmt.Errorf("lock shipment %d: %w", id, err)
	}
	return row, nil
}

// Emit appends the replies to the outbox.
func Emit(out outbox.Emitter, replies []shipping.Reply) error {
	for _, r := range replies {
		p := contract.SagaStepRepliedV1{SagaID: r.SagaID, Step: r.Step, CommandType: contract.SagaStepRepliedV1CommandType(r.CommandType),
			CommandID: r.CommandID, IdempotencyKey: r.IdempotencyKey, Outcome: contract.SagaStepRepliedV1Outcome(r.Outcome),
			Reason: r.Reason, ShipmentID: r.ShipmentID, TrackingNumber: r.TrackingNumber}
		if r.Outcome == shipping.Failed {
			p.Retryable = &r.Retryable
		}
		if _, err := out.Emit(outbox.Event{Payload: p, CausationID: r.CommandID}); err != nil {
			return fmt.Errorf("reply to %s %s: %w", r.CommandType, r.CommandID, err)
		}
	}
	return nil
}

// ApplyCreate applies a create command in the consumer's transaction: a
// new key stores the row (the worker calls the carrier after commit); a
// known key gets what shipping.Shipment.OnCreate says. A command that
// contradicts the key's shipment is a permanent error (dead-lettered with
// its reason) and changes nothing.
func ApplyCreate(ctx context.Context, tx pgx.Tx, out outbox.Emitter, c shipping.CreateCommand, now time.Time, budget time.Duration) error {
	s := shipping.NewShipment(c, now, budget)
	if _, created, err := insert(ctx, tx, &s, now); err != nil || created {
		return err
	}
	row, err := lockByKey(ctx, tx, c.Key)
	if err != nil {
		return err
	}
	if err := row.CheckCreate(c); err != nil {
		return idempotent.Permanent(err)
	}
	replies := row.OnCreate(c, now, budget)
	if err := save(ctx, tx, row.ID, &row.Shipment, now, false); err != nil {
		return err
	}
	return Emit(out, replies)
}

// ApplyCancel applies a cancellation in the consumer's transaction.
func ApplyCancel(ctx context.Context, tx pgx.Tx, out outbox.Emitter, c shipping.CancelCommand, now time.Time, budget time.Duration) error {
	s, replies := shipping.NewCancelledFirst(c)
	_, created, err := insert(ctx, tx, &s, now)
	if err != nil {
		return err
	}
	if !created {
		row, err := lockByKey(ctx, tx, c.ShipmentKey)
		if err != nil {
			return err
		}
		if err := row.CheckCancel(c); err != nil {
			return idempotent.Permanent(err)
		}
		replies = row.OnCancel(c, now, budget)
		if err := save(ctx, tx, row.ID, &row.Shipment, now, false); err != nil {
			return err
		}
	}
	return Emit(out, replies)
}

// Claim takes up to limit due shipments for the worker and leases them:
// they are not due again before lease has passed, so a worker that dies
// mid-call leaves its shipments to the next claim after the lease.
func Claim(ctx context.Context, pool *pgxpool.Pool, limit int, lease time.Duration) ([]Row, error) {
	rows, err := pool.Query(ctx, `update shipments s set next_attempt_at = now() + make_interval(secs => $2), leased_until = now() + make_interval(secs => $2),
		attempts = s.attempts + 1
		from (select id from shipments where next_attempt_at <= now() order by next_attempt_at limit $1 for update skip locked) due
		where s.id = due.id
		returning `+prefixed(), limit, lease.Seconds())
	if err != nil {
		return nil, fmt.Errorf("claim due shipments: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("claim due shipments: %w", err)
	}
	return out, nil
}

// prefixed is cols qualified by the update's alias (the subquery has an
// id column too).
func prefixed() string {
	return `s.id, s.idempotency_key, s.saga_id, s.order_id, s.parcel, s.status, coalesce(s.carrier_shipment_id, ''), coalesce(s.tracking_number, ''), s.create_calls,
	coalesce(s.create_command_id, ''), coalesce(s.create_step, ''), s.create_deadline, s.create_outcome, coalesce(s.create_reason, ''), s.create_retryable,
	coalesce(s.cancel_key, ''), coalesce(s.cancel_command_id, ''), coalesce(s.cancel_step, ''), s.cancel_deadline, coalesce(s.cancel_status, ''), s.cancel_internal,
	s.cancel_outcome, coalesce(s.cancel_reason, ''), s.cancel_retryable, s.attempts, coalesce(s.last_error, '')`
}

// ErrChanged is returned by CountCreateCall when the row no longer wants a
// create call (a cancellation or another worker got there first).
var ErrChanged = errors.New("shipment changed since it was claimed")

// CountCreateCall raises the row's create_calls and commits before the
// carrier is called: from then on the shipment may exist at the carrier,
// and any later attempt looks the key up first.
func CountCreateCall(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	tag, err := pool.Exec(ctx, `update shipments set create_calls = create_calls + 1, updated_at = now()
		where id = $1 and status = 'PENDING' and cancel_status is null and create_outcome is null`, id)
	if err != nil {
		return fmt.Errorf("count create call of shipment %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("shipment %d: %w", id, ErrChanged)
	}
	return nil
}

// Update applies a transition to row id under its lock and saves it with
// its replies in one transaction.
func Update(ctx context.Context, pool *pgxpool.Pool, w outbox.Writer, id int64, now time.Time,
	f func(s *shipping.Shipment) []shipping.Reply) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		row, err := lockByID(ctx, tx, id)
		if err != nil {
			return err
		}
		replies := f(&row.Shipment)
		if err := save(ctx, tx, id, &row.Shipment, now, true); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `update shipments set last_error = null where id = $1`, id); err != nil {
			return err
		}
		return w.Emitting(ctx, tx, func(out outbox.Emitter) error { return Emit(out, replies) })
	})
}

// RetryAt leaves row id to a later attempt at at, noting why.
func RetryAt(ctx context.Context, pool *pgxpool.Pool, id int64, at time.Time, reason string) error {
	if _, err := pool.Exec(ctx, `update shipments set next_attempt_at = $2, leased_until = null, last_error = $3, updated_at = now() where id = $1`,
		id, at, reason); err != nil {
		return fmt.Errorf("retry shipment %d: %w", id, err)
	}
	return nil
}

// ByKey reads the shipment of a create key.
func ByKey(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, key string) (Row, error) {
	row, err := scan(db.QueryRow(ctx, `select `+cols+` from shipments where idempotency_key = $1`, key))
	if err != nil {
		return Row{}, fmt.Errorf("shipment %s: %w", key, err)
	}
	return row, nil
}
