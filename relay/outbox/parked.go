package outbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors the operator commands return.
var (
	// ErrNotFound: no outbox row has the id.
	ErrNotFound = errors.New("outbox row not found")
	// ErrNotParked: the row exists but is not parked (published, skipped, or
	// still being retried by the relay), so retry and skip refuse to touch it.
	ErrNotParked = errors.New("outbox row is not parked")
	// ErrReasonRequired: skip without a reason.
	ErrReasonRequired = errors.New("a reason is required to skip an outbox row")
)

// ParkedRow is a row the relay gave up on after its attempts ran out. Every
// later row of the same partition key waits behind it.
type ParkedRow struct {
	ID           int64
	EventID      string
	EventType    string
	Topic        string
	PartitionKey string
	Attempts     int
	LastError    string
	CreatedAt    time.Time
	ParkedAt     time.Time
	Waiting      int // pending rows of the same key behind this one
}

// Parked lists parked rows in id order.
func Parked(ctx context.Context, pool *pgxpool.Pool) ([]ParkedRow, error) {
	rows, err := pool.Query(ctx, `
select o.id, o.event_id::text, o.event_type, o.topic, o.partition_key, o.attempts, coalesce(o.last_error, ''),
       o.created_at, o.parked_at,
       (select count(*) from outbox w
         where w.partition_key = o.partition_key and w.id > o.id
           and w.published_at is null and w.skipped_at is null)
  from outbox o
 where o.parked_at is not null and o.published_at is null and o.skipped_at is null
 order by o.id`)
	if err != nil {
		return nil, fmt.Errorf("list parked outbox rows: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ParkedRow, error) {
		var p ParkedRow
		err := r.Scan(&p.ID, &p.EventID, &p.EventType, &p.Topic, &p.PartitionKey, &p.Attempts, &p.LastError,
			&p.CreatedAt, &p.ParkedAt, &p.Waiting)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("list parked outbox rows: %w", err)
	}
	return out, nil
}

// Retry releases a parked row: its attempts start again from zero and the
// relay picks it up on its next pass (the NOTIFY wakes it). Its key stays
// blocked until the row is published.
func Retry(ctx context.Context, pool *pgxpool.Pool, id int64) error {
	return releaseParked(ctx, pool, id, `update outbox
   set parked_at = null, attempts = 0, next_attempt_at = null
 where id = $1 and parked_at is not null and published_at is null and skipped_at is null`)
}

// Skip gives up on a parked row for good: it is never published, and the
// rows of its key behind it flow again. reason is stored with the row.
func Skip(ctx context.Context, pool *pgxpool.Pool, id int64, reason string) error {
	if strings.TrimSpace(reason) == "" {
		return ErrReasonRequired
	}
	return releaseParked(ctx, pool, id, `update outbox
   set skipped_at = now(), skip_reason = $2
 where id = $1 and parked_at is not null and published_at is null and skipped_at is null`, reason)
}

func releaseParked(ctx context.Context, pool *pgxpool.Pool, id int64, update string, args ...any) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, update, append([]any{id}, args...)...)
		if err != nil {
			return fmt.Errorf("outbox row %d: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			var exists bool
			if err := tx.QueryRow(ctx, "select exists(select 1 from outbox where id = $1)", id).Scan(&exists); err != nil {
				return fmt.Errorf("outbox row %d: %w", id, err)
			}
			if !exists {
				return fmt.Errorf("%w: id %d", ErrNotFound, id)
			}
			return fmt.Errorf("%w: id %d", ErrNotParked, id)
		}
		if _, err := tx.Exec(ctx, notifySQL, NotifyChannel); err != nil {
			return fmt.Errorf("outbox row %d: notify: %w", id, err)
		}
		return nil
	})
}
