package idempotent

import (
	"context"
	"time"
)

const purgeBatch = `
DELETE FROM processed_events
WHERE consumer_group = $1 AND event_id IN (
    SELECT event_id FROM processed_events
    WHERE consumer_group = $1 AND processed_at < $2
    LIMIT $3)`

// Purge deletes the group's processed_events rows older than the retention,
// PurgeBatchSize rows per statement so no statement holds locks for long.
// It returns how many rows it deleted. Run calls it every PurgeInterval.
func (r *Runner) Purge(ctx context.Context) (int64, error) {
	cutoff := time.Now().Add(-r.cfg.Retention)
	var total int64
	for {
		tag, err := r.cfg.Pool.Exec(ctx, purgeBatch, r.cfg.Group, cutoff, r.cfg.PurgeBatchSize)
		if err != nil {
			return total, err
		}
		n := tag.RowsAffected()
		total += n
		r.m.purged.WithLabelValues(r.cfg.Group).Add(float64(n))
		r.m.purgedN.Add(n)
		if n < int64(r.cfg.PurgeBatchSize) {
			return total, nil
		}
	}
}

func (r *Runner) purgeLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.PurgeInterval)
	defer t.Stop()
	for {
		n, err := r.Purge(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.cfg.Logger.Warn("processed_events purge failed; retrying next interval", "group", r.cfg.Group, "err", err)
		case n > 0:
			r.cfg.Logger.Info("processed_events purged", "group", r.cfg.Group, "rows", n, "retention", r.cfg.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
