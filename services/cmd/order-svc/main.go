// Command order-svc is the saga's order service: the order API (every
// request presents an API key), the consumer of inventory, payment and saga
// outcome events that confirms or cancels orders, and the sweeper that
// cancels choreographed orders stuck too long. `order-svc keys` creates,
// lists and revokes the API's keys.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/internal/svc"
	"github.com/concordhq/concord/services/order"
	"github.com/concordhq/concord/services/order/orderapi"
	"github.com/concordhq/concord/services/order/orderconsumer"
	"github.com/concordhq/concord/services/order/orderstore"
)

func main() { kit.Main("order-svc", run) }

func run(ctx context.Context, args []string) error {
	var stuckAfter, sweepEvery *time.Duration
	var defaultFlow, keyFile *string
	return svc.Run(ctx, args, svc.Spec{
		Name: "order-svc", Summary: "Concord order service: order API and saga participant.",
		DatabaseEnv: "ORDERS_DATABASE_URL", DefaultAddr: ":8081", DefaultOpsAddr: ":9081",
		Commands: []kit.Command{keysCommand(os.Stdout)},
		Topics:   orderconsumer.Topics, Types: orderconsumer.Types, BatchHandler: orderconsumer.BatchHandler(), Migrate: orderstore.Migrate,
		Flags: func(fs *kit.FlagSet) {
			stuckAfter = fs.Duration("stuck-after", "ORDER_STUCK_AFTER", 60*time.Second, "cancel (reason timeout) orders not terminal after this long")
			sweepEvery = fs.Duration("sweep-interval", "ORDER_SWEEP_INTERVAL", time.Second, "how often stuck orders are looked for")
			defaultFlow = fs.String("default-flow", "ORDER_DEFAULT_FLOW", string(order.FlowChoreographed),
				"checkout of an order whose request names no \"flow\": choreographed (the services react to each other's events) or orchestrated (the orchestrator commands each step; needs a shipping_address)")
			keyFile = fs.String("api-key-file", "", "",
				"for local runs and tests: a file holding an API key with every scope, created with a new key when missing (mode 0600); the key is stored hashed like any other (see `order-svc keys`)")
		},
		CheckFlags: func() error {
			if _, ok := order.ParseFlow(*defaultFlow); !ok {
				return fmt.Errorf("--default-flow %q: want %s or %s", *defaultFlow, order.FlowChoreographed, order.FlowOrchestrated)
			}
			return nil
		},
		Setup: func(ctx context.Context, env *svc.Env) ([]func(context.Context) error, error) {
			if err := orderstore.RegisterMetrics(env.Ops.Registry); err != nil {
				return nil, err
			}
			store := &orderstore.Store{Pool: env.Pool, Outbox: env.Outbox}
			if *keyFile != "" {
				if err := bootstrapKey(ctx, store, *keyFile, env.Log); err != nil {
					return nil, err
				}
			}
			(&orderapi.Handler{Store: store, Keys: store, Log: env.Log, DefaultFlow: order.Flow(*defaultFlow)}).Register(env.API)
			sweeper := &orderstore.Sweeper{Store: store, MaxAge: *stuckAfter, Interval: *sweepEvery, Log: env.Log}
			return []func(context.Context) error{sweeper.Run}, nil
		},
	})
}
