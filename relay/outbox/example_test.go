package outbox_test

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
)

// An event is appended in the transaction of the business change it
// reports: both commit, or neither does. The payload is a generated struct,
// so its type, version, topic and partition key need no strings.
func ExampleWriter_Append() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://localhost/orders")
	events := outbox.Writer{} // TopicPrefix: "test-run-1." keeps side-by-side runs apart
	orderID := "0192f3a0-7c1e-7b3a-9d2e-5f6a7b8c9d01"
	_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `update orders set status = 'CANCELLED' where id = $1`, orderID); err != nil {
			return err
		}
		// An invalid payload is an error wrapping ErrInvalidEvent: returning
		// it rolls the update back too.
		_, err := events.Append(ctx, tx, outbox.Event{Payload: contract.OrderCancelledV1{OrderID: orderID, Reason: "timeout"}})
		return err
	})
}
