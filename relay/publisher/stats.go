package publisher

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statsCooldown is the least time between two ANALYZE runs of one relay:
// the workers of a relay time out together when a backlog arrives.
const statsCooldown = time.Minute

// statsRefresh refreshes the outbox's statistics after a batch read timed
// out. Autovacuum would too, but only on its next round (a minute by
// default), and a read already running keeps the plan it started with:
// minutes for a backlog of hundreds of thousands of rows planned as a few.
type statsRefresh struct {
	mu   sync.Mutex
	last time.Time
}

func (s *statsRefresh) refresh(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) {
	s.mu.Lock()
	if !s.last.IsZero() && time.Since(s.last) < statsCooldown {
		s.mu.Unlock()
		return
	}
	s.last = time.Now()
	s.mu.Unlock()
	start := time.Now()
	if _, err := pool.Exec(ctx, "analyze outbox"); err != nil {
		log.Warn("a batch read timed out and the outbox's statistics could not be refreshed; autovacuum will, on its next round "+
			"(let the relay's role own the outbox table, or grant it MAINTAIN on PostgreSQL 17, so it can)", "err", err)
		return
	}
	log.Warn("a batch read timed out, planned on statistics from before the backlog: refreshed them (ANALYZE outbox)",
		"took", time.Since(start).Round(time.Millisecond))
}

// timedOut says whether err is a statement cancelled by statement_timeout.
func timedOut(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014" // query_canceled
}
