package orchestratorstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/backoff"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/orchestrator"
)

// Sweep acts on up to limit sagas whose deadline passed (a reply that did
// not come, a retry whose backoff ended), in one transaction, and returns
// how many it moved. It locks them with FOR UPDATE SKIP LOCKED: a saga
// another instance's sweeper or reply handler holds is left to it, so two
// instances never drive one saga at once, and nothing waits.
func (s *Store) Sweep(ctx context.Context, pool *pgxpool.Pool, limit int) (int, error) {
	now := s.now()
	moved := 0
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		moved = 0
		rows, err := tx.Query(ctx, `select saga_id from saga_executions
			where status in ('RUNNING', 'COMPENSATING') and deadline <= $1
			order by deadline limit $2 for update skip locked`, now, limit)
		if err != nil {
			return fmt.Errorf("due sagas: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("due sagas: %w", err)
		}
		if len(ids) == 0 {
			return nil
		}
		return s.Outbox.Emitting(ctx, tx, func(out outbox.Emitter) error {
			for _, id := range ids {
				sg, rw, ok, err := s.load(ctx, tx, id)
				if err != nil || !ok {
					return errors.Join(err, fmt.Errorf("saga %s vanished under its lock", id))
				}
				d := orchestrator.OnDeadline(s.Def, sg, now)
				if !d.Changed {
					s.Metrics.absorbed(d.Absorbed)
					continue
				}
				if err := s.save(ctx, tx, out, d, rw, ""); err != nil {
					return err
				}
				moved++
			}
			return nil
		})
	})
	return moved, err
}

// RunSweeper sweeps every interval until ctx is done, draining what is due
// (batches of batch sagas) each time; a failed sweep is logged and retried
// with backoff.
func (s *Store) RunSweeper(ctx context.Context, pool *pgxpool.Pool, interval time.Duration, batch int) error {
	bo := backoff.Loop{First: interval, Max: 30 * time.Second}
	wait := interval
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = interval
		for {
			n, err := s.Sweep(ctx, pool, batch)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				wait = bo.Failed()
				s.log().Error("saga sweep failed", "err", err, "retry_in", wait)
				break
			}
			bo.Succeeded()
			if n < batch {
				break
			}
		}
	}
}

// StuckSaga is a non-terminal saga that has not moved for a while.
type StuckSaga struct {
	SagaID, Status string
	UpdatedAt      time.Time
	Deadline       *time.Time
}

// Stuck lists the non-terminal sagas (at most limit) that have not moved
// for longer than after, oldest first, and how many there are in all.
func Stuck(ctx context.Context, pool *pgxpool.Pool, after time.Duration, limit int) ([]StuckSaga, int, error) {
	var total int
	if err := pool.QueryRow(ctx, `select count(*) from saga_executions
		where status not in ('COMPLETED', 'COMPENSATED', 'FAILED') and updated_at < now() - $1::interval`, after).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("stuck sagas: %w", err)
	}
	rows, err := pool.Query(ctx, `select saga_id, status, updated_at, deadline from saga_executions
		where status not in ('COMPLETED', 'COMPENSATED', 'FAILED') and updated_at < now() - $1::interval
		order by updated_at limit $2`, after, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("stuck sagas: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[StuckSaga])
	return out, total, err
}

// RunStuckDetector looks for stuck sagas every interval: it sets
// concord_saga_stuck and logs each (up to ten) with its status and age,
// so an operator finds a saga whose participant went silent or whose
// sweeper is not running. It also refreshes concord_saga_reviews_open.
func (s *Store) RunStuckDetector(ctx context.Context, pool *pgxpool.Pool, after, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		stuck, total, err := Stuck(ctx, pool, after, 10)
		if err != nil {
			s.log().Warn("stuck saga check failed", "err", err)
			continue
		}
		s.Metrics.stuck(total)
		for _, st := range stuck {
			s.log().Warn("saga stuck", "saga_id", st.SagaID, "status", st.Status, "unchanged_for", time.Since(st.UpdatedAt).Round(time.Second),
				"deadline", st.Deadline)
		}
		var open int
		if err := pool.QueryRow(ctx, `select count(*) from saga_reviews where resolved_at is null`).Scan(&open); err == nil {
			s.Metrics.open(open)
		}
	}
}
