package publisher

import (
	"context"
	"slices"
	"time"
)

// cleanupLoop deletes published rows older than the retention, a small
// batch per statement so no statement holds many locks or bloats WAL in one
// go. Only the owner of shard 0 cleans, so instances do not race each other.
func (r *Relay) cleanupLoop(ctx context.Context) {
	if r.cfg.Retention < 0 {
		return
	}
	for {
		r.sleep(ctx, -1, r.cfg.CleanupInterval)
		if ctx.Err() != nil {
			return
		}
		if !slices.Contains(r.owner.shards(), 0) {
			continue
		}
		n, err := r.Cleanup(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("outbox cleanup", "err", err, "deleted", n)
		}
	}
}

// Cleanup deletes published rows older than the retention, CleanupBatch rows
// per statement, until none is left; it returns how many it deleted.
func (r *Relay) Cleanup(ctx context.Context) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		tag, err := r.cfg.Pool.Exec(ctx, `delete from outbox where id in (
			select id from outbox where published_at < now() - $1::interval limit $2)`,
			r.cfg.Retention, r.cfg.CleanupBatch)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		r.m.cleaned.Add(float64(tag.RowsAffected()))
		if tag.RowsAffected() < int64(r.cfg.CleanupBatch) {
			break
		}
	}
	return total, ctx.Err()
}

// metricsLoop refreshes the backlog gauges from the table.
func (r *Relay) metricsLoop(ctx context.Context) {
	for ctx.Err() == nil {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var rows, parked int64
		var age float64
		err := r.cfg.Pool.QueryRow(qctx, `select count(*), count(*) filter (where parked_at is not null),
			coalesce(extract(epoch from now() - min(created_at)), 0)::float8
			from outbox where published_at is null and skipped_at is null`).Scan(&rows, &parked, &age)
		cancel()
		if err == nil {
			r.m.backlog.Set(float64(rows))
			r.m.parked.Set(float64(parked))
			r.m.oldestAge.Set(max(age, 0))
		} else if ctx.Err() == nil {
			r.log.Debug("outbox backlog gauges", "err", err)
		}
		r.sleep(ctx, -1, r.cfg.MetricsInterval)
	}
}
