package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
)

// A buffered batch and a queued batch land as Append would write them: in
// order, validated, and only with the transaction.
func TestBufferAndQueueWriteInOrderWithTheTransaction(t *testing.T) {
	pool := newDB(t)
	ctx := context.Background()
	orderID := uuid.NewString()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var buf outbox.Buffer
		for seq := 1; seq <= 3; seq++ {
			if _, err := buf.Emit(outbox.Event{Payload: orderCreated(orderID, seq)}); err != nil {
				return err
			}
		}
		if _, err := buf.Emit(outbox.Event{Payload: contract.OrderCreatedV2{OrderID: orderID}}); !errors.Is(err, outbox.ErrInvalidEvent) {
			t.Fatalf("invalid event added: %v", err)
		}
		if err := buf.Flush(ctx, tx); err != nil {
			return err
		}
		var b pgx.Batch
		if _, err := (outbox.Writer{}).Queue(&b, outbox.Event{Payload: orderCreated(orderID, 4)}); err != nil {
			return err
		}
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `select (payload::jsonb #>> '{data,total_amount}')::int from outbox where partition_key = $1 order by id`, orderID)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 4 || seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 || seqs[3] != 4 {
		t.Fatalf("rows by id carry seq %v, want [1 2 3 4]", seqs)
	}

	// Without the transaction's commit nothing lands.
	_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var buf outbox.Buffer
		if _, err := buf.Emit(outbox.Event{Payload: orderCreated(orderID, 5)}); err != nil {
			t.Fatal(err)
		}
		if err := buf.Flush(ctx, tx); err != nil {
			t.Fatal(err)
		}
		return errors.New("business change failed")
	})
	var n int
	if err := pool.QueryRow(ctx, `select count(*) from outbox where partition_key = $1`, orderID).Scan(&n); err != nil || n != 4 {
		t.Fatalf("%d rows after a rolled-back flush (err %v), want 4", n, err)
	}
}
