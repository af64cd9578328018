package paymentconsumer

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/services/payment/paymentstore"
)

// sweepBatch bounds the orders one sweep settles in one transaction.
const sweepBatch = 500

// RefuseOverdueReservations settles the reservations that have waited at
// least the checks' wait for their order: each is decided with
// payment.CheckReservation as on arrival, so one whose order is still
// unknown is refused as unknown_order (recorded and counted, nothing
// charged). It locks the orders as the consumer does, so it never races
// an order.created being applied, and returns how many it settled.
func RefuseOverdueReservations(ctx context.Context, pool *pgxpool.Pool, checks *Checks) (int, error) {
	wait := checks.wait()
	ids, err := paymentstore.OverdueOrders(ctx, pool, wait, sweepBatch)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	var settled int
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := paymentstore.LockOrders(ctx, tx, ids); err != nil {
			return err
		}
		known, err := paymentstore.KnownOrders(ctx, tx, ids)
		if err != nil {
			return err
		}
		waiting, err := paymentstore.WaitingFor(ctx, tx, ids)
		if err != nil {
			return err
		}
		s := settlement{known: known, wait: wait, fresh: map[string]paymentstore.WaitingReservation{}}
		for _, id := range ids {
			for _, w := range waiting[id] {
				s.settle(w, true)
			}
		}
		settled = len(s.done)
		return s.write(ctx, tx)
	})
	if err != nil {
		return 0, fmt.Errorf("settle reservations waiting over %s: %w", wait, err)
	}
	return settled, nil
}

// SweepUnknownOrders runs RefuseOverdueReservations until ctx is done,
// every quarter of the wait (at least every 100ms, at most every 5s), so
// a reservation for an order that never comes is refused within the wait
// and one interval. Errors are logged and the sweep goes on.
func SweepUnknownOrders(pool *pgxpool.Pool, checks *Checks, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		interval := min(max(checks.wait()/4, 100*time.Millisecond), 5*time.Second)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			n, err := RefuseOverdueReservations(ctx, pool, checks)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("reservations waiting for their order", "err", err)
			case n > 0:
				log.Warn("reservations settled after waiting for their order", "settled", n, "wait", checks.wait())
			}
		}
	}
}
