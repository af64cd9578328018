package reconcilercli

import (
	"context"
	"log/slog"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/reconciler"
)

// serve is `reconciler run`: the scan loop, the scheduled heal and the
// metrics refresher, until SIGTERM. A batch in flight finishes its record
// transaction or rolls back as a whole, so stopping never loses a finding
// half-written.
func serve(ctx context.Context, c *common, d *deps) error {
	ops, err := kit.NewOpsServer(*c.addr, func(ctx context.Context) error { return d.pool.Ping(ctx) })
	if err != nil {
		return err
	}
	if err := kit.RegisterPool(ops.Registry, "reconciler", d.pool); err != nil {
		return err
	}
	m := reconciler.NewMetrics(ops.Registry)
	s, err := c.scanner(d, m)
	if err != nil {
		return err
	}
	h, err := c.healer(d, m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 4)
	go func() { errc <- ops.Run(ctx, d.log, 5*time.Second) }()
	go func() { errc <- s.Run(ctx, *c.idle, *c.backoff) }()
	go func() { errc <- every(ctx, 15*time.Second, func() { refresh(ctx, d.log, m, *c.job, d.store.Status) }) }()
	if *c.healEach > 0 {
		go func() {
			errc <- every(ctx, *c.healEach, func() {
				now := time.Now()
				rep, err := h.Heal(ctx, now.Add(-*c.healWin), now)
				if err != nil && ctx.Err() == nil {
					d.log.Warn("reconciler: scheduled heal failed", "err", err)
					return
				}
				d.log.Info("reconciler: scheduled heal", "events", rep.Events, "payments", rep.Payments,
					"findings_opened", rep.FindingsOpened, "commands", rep.CommandsEmitted, "unknown", rep.Unknown)
			})
		}()
	} else {
		errc <- nil
	}
	d.log.Info("reconciler: running", "job", s.Job(), "rate", d.limiter.Limit())
	var first error
	for range 4 {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

func every(ctx context.Context, d time.Duration, f func()) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// refresh sets the gauges from status (the lag, the cycle, the open
// findings); a failed read leaves them as they were.
func refresh(ctx context.Context, log *slog.Logger, m *reconciler.Metrics, job string, status func(context.Context) (reconciler.Status, error)) {
	st, err := status(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("reconciler: status for metrics", "err", err)
		}
		return
	}
	m.ObserveStatus(st, job)
}
