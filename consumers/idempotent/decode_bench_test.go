package idempotent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/schemas"
)

// BenchmarkDecodeRecord is the runner's CPU cost per record before any
// database work, on the consumer benchmark's 1 KiB order.created events:
// envelope decoding, schema validation, the event handed to the handler.
func BenchmarkDecodeRecord(b *testing.B) {
	id := schemas.NewEventID()
	data, _ := json.Marshal(map[string]any{"order_id": id, "customer_id": "order-00001", "currency": "EUR", "total_amount": 100,
		"items": []map[string]any{{"sku": "SKU-1", "quantity": 1, "unit_price": 100}}, "seq": 1, "note": strings.Repeat("x", 620)})
	v, err := schemas.Envelope{EventID: id, EventType: "order.created", EventVersion: 2, Timestamp: time.Now(),
		AggregateType: "order", AggregateID: "order-00001", CorrelationID: "order-00001", Data: data}.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	rec := &kgo.Record{Topic: "t", Key: []byte("order-00001"), Value: v, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderEventID, Value: []byte(id)},
		{Key: schemas.HeaderEventType, Value: []byte("order.created")},
		{Key: schemas.HeaderContentType, Value: []byte(schemas.ContentTypeJSON)},
		{Key: schemas.HeaderTraceparent, Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
	}}
	cat := schemas.MustDefault()
	b.SetBytes(int64(len(v)))
	b.ReportAllocs()
	for b.Loop() {
		if d := decodeRecord(cat, nil, rec); d.reason != "" {
			b.Fatal(d.err)
		}
	}
}
