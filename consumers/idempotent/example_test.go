package idempotent_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
)

// A typed handler reads the generated struct of the version it knows and
// emits the next step through out; the runner writes its effect, the
// dedupe row and what it emitted in one transaction, so a redelivered
// event changes nothing and no emitted event is lost.
func ExampleHandle() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://localhost/inventory")

	var mux idempotent.Mux
	idempotent.Handle(&mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.OrderCreatedV3, out outbox.Emitter) error {
		if _, err := tx.Exec(ctx, `insert into reservations (order_id) values ($1)`, d.OrderID); err != nil {
			return err
		}
		_, err := out.Emit(outbox.CausedBy(ev.Envelope, contract.InventoryReservedV2{
			OrderID: d.OrderID, ReservationID: ev.EventID, Items: []contract.InventoryReservedV2Item{{SKU: "SKU-1", Quantity: 1}},
		}))
		return err
	})

	runner, err := idempotent.NewRunner(idempotent.Config{
		Group:   "inventory-svc",
		Topics:  []string{contract.TypeOrderCreated.Topic()},
		Pool:    pool,
		Kafka:   kit.KafkaConfig{Brokers: []string{"127.0.0.1:9092"}},
		Handler: mux.Handle,
		Types:   mux.Types(), // other types on the topic are acknowledged without a transaction
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = runner.Run(ctx) // until ctx is done; drains and commits on the way out
}
