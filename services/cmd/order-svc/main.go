// Command order-svc is the saga's order service: the order API, the
// consumer of inventory and payment events that confirms or cancels
// orders, and the sweeper that cancels orders stuck too long.
package main

import (
	"context"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/internal/svc"
	"github.com/concordhq/concord/services/order/orderapi"
	"github.com/concordhq/concord/services/order/orderconsumer"
	"github.com/concordhq/concord/services/order/orderstore"
)

func main() { kit.Main("order-svc", run) }

func run(ctx context.Context, args []string) error {
	var stuckAfter, sweepEvery *time.Duration
	return svc.Run(ctx, args, svc.Spec{
		Name: "order-svc", Summary: "Concord order service: order API and saga participant.",
		DatabaseEnv: "ORDERS_DATABASE_URL", DefaultAddr: ":8081",
		Topics: orderconsumer.Topics, Types: orderconsumer.Types, BatchHandler: orderconsumer.BatchHandler(), Migrate: orderstore.Migrate,
		Flags: func(fs *kit.FlagSet) {
			stuckAfter = fs.Duration("stuck-after", "ORDER_STUCK_AFTER", 60*time.Second, "cancel (reason timeout) orders not terminal after this long")
			sweepEvery = fs.Duration("sweep-interval", "ORDER_SWEEP_INTERVAL", time.Second, "how often stuck orders are looked for")
		},
		Setup: func(ctx context.Context, env *svc.Env) ([]func(context.Context) error, error) {
			if err := orderstore.RegisterMetrics(env.Ops.Registry); err != nil {
				return nil, err
			}
			store := &orderstore.Store{Pool: env.Pool, Outbox: env.Outbox}
			(&orderapi.Handler{Store: store, Log: env.Log}).Register(env.API)
			sweeper := &orderstore.Sweeper{Store: store, MaxAge: *stuckAfter, Interval: *sweepEvery, Log: env.Log}
			return []func(context.Context) error{sweeper.Run}, nil
		},
	})
}
