package auditsnapshot

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
)

// Work is what a deployment still has to do; the audit's checks mean
// something only once all of it is zero (Quiet). A count that could not be
// read is -1, which is not quiet either.
type Work struct {
	InFlight    int64 // orders not terminal, sagas not ended, hold commands and shipments not settled
	Held        int64 // reservations held
	Pending     int64 // payments pending
	RefundsDue  int64 // payments paid for cancelled orders
	Unpublished int64 // outbox rows of every service not yet published
	Lag         int64 // records published and not yet consumed by the groups
}

// Quiet reports whether nothing is left to do.
func (w Work) Quiet() bool { return w == Work{} }

func (w Work) String() string {
	return fmt.Sprintf("orders and sagas in flight %d, reservations held %d, payments pending %d, refunds due %d, unpublished events %d, consumer lag %d",
		w.InFlight, w.Held, w.Pending, w.RefundsDue, w.Unpublished, w.Lag)
}

// ReadWork counts what src's services still have to do, and the lag of the
// consumer groups (none given: lag is not read).
func ReadWork(ctx context.Context, src Sources, adm *kadm.Client, groups ...string) Work {
	var w Work
	q := func(pool *pgxpool.Pool, sql string, into *int64) {
		if pool == nil {
			return
		}
		var n int64
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			*into = -1
		} else if *into >= 0 {
			*into += n
		}
	}
	q(src.Orders, `select count(*) from orders where status not in ('CONFIRMED', 'CANCELLED')`, &w.InFlight)
	q(src.Orchestrator, `select count(*) from saga_executions where status not in ('COMPLETED', 'COMPENSATED', 'FAILED')`, &w.InFlight)
	if src.Orchestrator != nil {
		q(src.Payments, `select count(*) from hold_commands where status = 'pending'`, &w.InFlight)
	}
	q(src.Shipping, `select count(*) from shipments where next_attempt_at is not null`, &w.InFlight)
	q(src.Inventory, `select count(*) from reservations where status = 'HELD'`, &w.Held)
	q(src.Payments, `select count(*) from payments where status = 'pending'`, &w.Pending)
	q(src.Payments, `select count(*) from payments where status = 'paid' and order_cancelled`, &w.RefundsDue)
	for _, pool := range []*pgxpool.Pool{src.Orders, src.Inventory, src.Payments, src.Orchestrator, src.Shipping} {
		q(pool, `select count(*) from outbox where published_at is null`, &w.Unpublished)
	}
	if len(groups) > 0 {
		lags, err := adm.Lag(ctx, groups...)
		if err != nil {
			w.Lag = -1
		}
		for _, g := range lags {
			if g.Error() != nil {
				w.Lag = -1
				break
			}
			w.Lag += g.Lag.Total()
		}
	}
	return w
}

// WaitQuiet reads the work left every quarter second until there is none
// (nil) or timeout passes (an error naming what is left); each reading
// goes to progress when it is not nil.
func WaitQuiet(ctx context.Context, src Sources, adm *kadm.Client, groups []string, timeout time.Duration, progress func(Work)) error {
	deadline := time.Now().Add(timeout)
	for {
		w := ReadWork(ctx, src, adm, groups...)
		if w.Quiet() {
			return nil
		}
		if progress != nil {
			progress(w)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not quiet after %s: %s", timeout, w)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
