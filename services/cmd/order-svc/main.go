// Command order-svc is the saga's order service: the order API, the
// consumer of inventory and payment events that confirms or cancels
// orders, and the sweeper that cancels orders stuck too long.
package main

import (
	"context"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/internal/svc"
	"github.com/concordhq/concord/services/order/http"
	"github.com/concordhq/concord/services/order/kafka"
	"github.com/concordhq/concord/services/order/postgres"
)

func main() { kit.Main("order-svc", run) }

func run(ctx context.Context, args []string) error {
	var stuckAfter, sweepEvery *time.Duration
	return svc.Run(ctx, args, svc.Spec{
		Name: "order-svc", Summary: "Concord order service: order API and saga participant.",
		DatabaseEnv: "ORDERS_DATABASE_URL", DefaultAddr: ":8081",
		Topics: kafka.Topics, Handlers: kafka.Handlers(), BatchHandler: kafka.BatchHandler(), Migrate: postgres.Migrate,
		Flags: func(fs *kit.FlagSet) {
			stuckAfter = fs.Duration("stuck-after", "ORDER_STUCK_AFTER", 60*time.Second, "cancel (reason timeout) orders not terminal after this long")
			sweepEvery = fs.Duration("sweep-interval", "ORDER_SWEEP_INTERVAL", time.Second, "how often stuck orders are looked for")
		},
		Setup: func(ctx context.Context, env *svc.Env) ([]func(context.Context) error, error) {
			store := &postgres.Store{Pool: env.Pool}
			(&http.Handler{Store: store, Log: env.Log}).Register(env.API)
			sweeper := &postgres.Sweeper{Store: store, MaxAge: *stuckAfter, Interval: *sweepEvery, Log: env.Log}
			return []func(context.Context) error{sweeper.Run}, nil
		},
	})
}
