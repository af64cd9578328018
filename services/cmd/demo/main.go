// Command demo is Concord's smoke run on the real stack: it builds an
// order.created v2 event, validates it against the schema catalog, produces
// it to Kafka with franz-go, consumes it back and prints the round trip.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/schemas"
)

func main() { kit.Main("demo", run) }

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("demo", "Concord smoke run: validate an order.created event, produce it to Kafka, consume it back.")
	kf := kit.AddKafkaFlags(fs)
	topic := fs.String("topic", "DEMO_TOPIC", "concord-demo.order-events", "topic for the round trip")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	cat, err := schemas.Default()
	if err != nil {
		return err
	}
	orderID := schemas.NewEventID()
	data, _ := json.Marshal(map[string]any{
		"order_id": orderID, "customer_id": "cus_demo", "currency": "EUR", "total_amount": 2500,
		"items":            []map[string]any{{"sku": "SKU-001", "quantity": 2, "unit_price": 1250}},
		"shipping_address": map[string]any{"line1": "Hauptstr. 1", "city": "Berlin", "postal_code": "10115", "country": "DE"},
	})
	ev := schemas.Envelope{
		EventID: schemas.NewEventID(), EventType: "order.created", EventVersion: 2, Timestamp: time.Now(),
		AggregateType: "order", AggregateID: orderID, CorrelationID: orderID, Data: data,
	}
	value, err := ev.Marshal()
	if err != nil {
		return err
	}
	if err := cat.Validate(value); err != nil {
		return fmt.Errorf("demo event does not validate: %w", err)
	}
	fmt.Printf("validated   %s v%d %s against schemas/events/order.created/v2.schema.json\n", ev.EventType, ev.EventVersion, ev.EventID)

	cl, err := kit.NewKafkaClient(ctx, kf.Config(), nil,
		kgo.DefaultProduceTopic(*topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, *topic); err != nil {
		return fmt.Errorf("create topic %s: %w", *topic, err)
	}
	// Join the topic at its end before producing, so the record we read back
	// is the one we wrote.
	joinCtx, joinCancel := context.WithTimeout(ctx, 2*time.Second)
	cl.PollFetches(joinCtx)
	joinCancel()

	rec := &kgo.Record{Key: []byte(orderID), Value: value, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderEventID, Value: []byte(ev.EventID)},
		{Key: schemas.HeaderEventType, Value: []byte(ev.EventType)},
		{Key: schemas.HeaderEventVersion, Value: []byte("2")},
		{Key: schemas.HeaderContentType, Value: []byte(schemas.ContentTypeJSON)},
	}}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	fmt.Printf("produced    %s key=%s → %s partition %d offset %d\n", ev.EventType, orderID, rec.Topic, rec.Partition, rec.Offset)

	for {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("did not read the event back: %w", err)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			return fmt.Errorf("fetch: %w", errs[0].Err)
		}
		for _, r := range fetches.Records() {
			got, err := schemas.DecodeEnvelope(r.Value)
			if err != nil || got.EventID != ev.EventID {
				continue
			}
			if err := cat.Validate(r.Value); err != nil {
				return fmt.Errorf("consumed event does not validate: %w", err)
			}
			fmt.Printf("consumed    %s partition %d offset %d\n", got.EventID, r.Partition, r.Offset)
			pretty, _ := json.MarshalIndent(json.RawMessage(r.Value), "            ", "  ")
			fmt.Printf("            %s\n", pretty)
			fmt.Println("round trip OK")
			return nil
		}
	}
}
