// Command roundtrip is Concord's outbox and idempotent consumer in one
// page. Read it top to bottom:
//
//  1. a business change (an order row) and its event (order.created) are
//     written in one transaction: the event exists if and only if the
//     order does;
//  2. the relay publishes the outbox row to Kafka;
//  3. an idempotent consumer applies the event once: its effect (a row in
//     shipments) and the dedupe row commit together;
//  4. the same record is delivered again, as Kafka's at-least-once delivery
//     may, and changes nothing.
//
// It needs a PostgreSQL database it may create tables in and a Kafka broker:
//
//	go run ./roundtrip --database-url postgres://… --kafka-brokers 127.0.0.1:19092
//
// (or CONCORD_DATABASE_URL and CONCORD_KAFKA_BROKERS).
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/relay/publisher"
	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

func main() {
	kit.Main("roundtrip", func(ctx context.Context, args []string) error {
		fs := kit.NewFlagSet("roundtrip", "roundtrip: the outbox and the idempotent consumer in one page (append, relay, consume once, redeliver).")
		kf := kit.AddKafkaFlags(fs)
		dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL database it may create tables in (required)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if err := kit.Require("database-url", *dbURL); err != nil {
			return kit.UsageError{Err: err}
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return Run(ctx, *dbURL, kf.Config(), fmt.Sprintf("roundtrip-%d.", time.Now().UnixNano()))
	})
}

// Run does the four steps against the database at dbURL and the brokers,
// on topics named prefix + the catalog's topic. It prints what happens.
func Run(ctx context.Context, dbURL string, kafka kit.KafkaConfig, prefix string) error {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, migrate := range []func(context.Context, *pgxpool.Pool) error{outbox.Migrate, idempotent.Migrate} {
		if err := migrate(ctx, pool); err != nil {
			return err
		}
	}
	if _, err := pool.Exec(ctx, `create table if not exists orders (id uuid primary key, total bigint not null);
		create table if not exists shipments (order_id uuid primary key, event_id uuid not null)`); err != nil {
		return err
	}
	events := outbox.Writer{TopicPrefix: prefix}
	topic := prefix + contract.TypeOrderCreated.Topic()
	if err := createTopic(ctx, kafka, topic); err != nil {
		return err
	}

	// 1. The order and its event, in one transaction. The payload is a
	// generated struct: its type, version, topic and key come with it.
	orderID := schemas.NewEventID()
	var appended schemas.Envelope
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `insert into orders (id, total) values ($1, 2500)`, orderID); err != nil {
			return err
		}
		appended, err = events.Append(ctx, tx, outbox.Event{Payload: contract.OrderCreatedV3{
			OrderID: orderID, CustomerID: "cus_42", Currency: "EUR", TotalAmount: 2500,
			Items: []contract.OrderCreatedV3Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: 2500}},
		}})
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("1. order %s committed with event %s in the outbox\n", orderID, appended.EventID)

	// 2. The relay publishes it (a service runs it in-process or as the
	// relay binary).
	relay, err := publisher.New(publisher.Config{Pool: pool, Kafka: kafka})
	if err != nil {
		return err
	}
	stop := background(ctx, relay.Run)
	defer stop()

	// 3. A consumer applies it once: the handler reads the generated struct
	// and writes its effect with tx, which commits with the dedupe row.
	var mux idempotent.Mux
	idempotent.Handle(&mux, func(ctx context.Context, tx pgx.Tx, ev idempotent.Event, d contract.OrderCreatedV3, _ outbox.Emitter) error {
		_, err := tx.Exec(ctx, `insert into shipments (order_id, event_id) values ($1, $2)`, d.OrderID, ev.EventID)
		return err
	})
	runner, err := idempotent.NewRunner(idempotent.Config{Group: prefix + "shipping", Topics: []string{topic},
		Pool: pool, Kafka: kafka, Handler: mux.Handle, Types: mux.Types(), Outbox: events})
	if err != nil {
		return err
	}
	stopRunner := background(ctx, runner.Run)
	defer stopRunner()
	if err := waitFor(ctx, func() bool { return runner.Stats().Applied == 1 }); err != nil {
		return fmt.Errorf("waiting for the event to be applied: %w", err)
	}
	n, err := count(ctx, pool)
	if err != nil {
		return err
	}
	fmt.Printf("3. applied once: %d shipment\n", n)

	// 4. The same record again: the dedupe row turns it into a no-op.
	if err := redeliver(ctx, kafka, topic, appended.EventID); err != nil {
		return err
	}
	if err := waitFor(ctx, func() bool { return runner.Stats().Duplicates == 1 }); err != nil {
		return fmt.Errorf("waiting for the redelivery: %w", err)
	}
	if n, err = count(ctx, pool); err != nil {
		return err
	}
	fmt.Printf("4. redelivered: skipped as a duplicate, still %d shipment\n", n)
	if n != 1 {
		return fmt.Errorf("%d shipments after a redelivery, want 1", n)
	}
	return nil
}

// redeliver copies the published record of eventID back onto its topic.
func redeliver(ctx context.Context, kafka kit.KafkaConfig, topic, eventID string) error {
	cl, err := kit.NewKafkaClient(ctx, kafka, nil, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		for _, r := range fs.Records() {
			env, err := schemas.DecodeEnvelope(r.Value)
			if err == nil && env.EventID == eventID {
				dup := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: r.Headers}
				return cl.ProduceSync(ctx, dup).FirstErr()
			}
		}
	}
}

func createTopic(ctx context.Context, kafka kit.KafkaConfig, topic string) error {
	cl, err := kit.NewKafkaClient(ctx, kafka, nil)
	if err != nil {
		return err
	}
	defer cl.Close()
	return publisher.CreateTopics(ctx, kadm.NewClient(cl), 1, -1, topic)
}

func count(ctx context.Context, pool *pgxpool.Pool) (n int, err error) {
	err = pool.QueryRow(ctx, `select count(*) from shipments`).Scan(&n)
	return n, err
}

// background runs f until the returned stop is called.
func background(ctx context.Context, f func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f(ctx) }()
	return func() { cancel(); <-done }
}

func waitFor(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.Join(errors.New("deadline"), ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}
