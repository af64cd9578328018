// Command inventory-svc is the saga's inventory service: stock per SKU,
// all-or-nothing reservations on order.created, commit on payment, release
// on payment failure or cancellation; events that contradict what it
// knows of an order (no reservation, a confirmed order) move no stock and
// are recorded for review.
package main

import (
	"context"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/internal/contradiction"
	"github.com/concordhq/concord/services/internal/svc"
	"github.com/concordhq/concord/services/inventory/inventoryapi"
	"github.com/concordhq/concord/services/inventory/inventoryconsumer"
	"github.com/concordhq/concord/services/inventory/inventorystore"
)

func main() { kit.Main("inventory-svc", run) }

func run(ctx context.Context, args []string) error {
	return svc.Run(ctx, args, svc.Spec{
		Name: "inventory-svc", Summary: "Concord inventory service: stock, reservations, saga participant.",
		DatabaseEnv: "INVENTORY_DATABASE_URL", DefaultOpsAddr: ":9082",
		Topics: inventoryconsumer.Topics, Types: inventoryconsumer.Types, BatchHandler: inventoryconsumer.BatchHandler(), Migrate: inventorystore.Migrate,
		// One transaction at a time: a batch locks the stock rows of every
		// SKU it touches (most of a small hot set) until it commits, so
		// batches of different partitions would only queue behind each
		// other's locks. One batch at a time, in a fixed handful of round
		// trips (see inventorystore.ApplyBatch), is faster. The batches
		// that wait meanwhile ride in the next transaction: with a
		// partition per transaction, the four topics' two dozen
		// partitions would queue behind each other's commits. Correctness
		// depends on neither.
		MaxConcurrentPartitions: 1, JoinPartitions: true,
		Setup: func(ctx context.Context, env *svc.Env) ([]func(context.Context) error, error) {
			if err := inventorystore.RegisterMetrics(env.Ops.Registry); err != nil {
				return nil, err
			}
			if err := contradiction.RegisterMetrics(env.Ops.Registry); err != nil {
				return nil, err
			}
			(&inventoryapi.Handler{Pool: env.Pool, Log: env.Log}).Register(env.Ops.Mux)
			return nil, nil
		},
	})
}
