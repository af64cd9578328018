// Package sagaevent appends the saga's events to a service's outbox.
//
// Every saga event (order.*, inventory.*, payment.*) belongs to the order
// aggregate: its schema pins aggregate_type to "order" and its partition key
// is the order id, so all events of one order stay in order on their
// topics. outbox.Append derives the aggregate type from the event type's
// prefix ("payment" for payment.processed), which those schemas refuse, so
// this package builds the same outbox row with the order as aggregate. Once
// outbox.Event can name the aggregate type, Append can call it directly.
package sagaevent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

type prefixKey struct{}

// WithTopicPrefix returns a context under which Append writes events to
// prefix + the catalog's topic. Tests and side-by-side runs use it to keep
// their events apart on a shared broker; the services take it from
// --topic-prefix.
func WithTopicPrefix(ctx context.Context, prefix string) context.Context {
	return context.WithValue(ctx, prefixKey{}, prefix)
}

// Topic is the topic events of the given catalog topic go to under ctx.
func Topic(ctx context.Context, topic string) string {
	p, _ := ctx.Value(prefixKey{}).(string)
	return p + topic
}

// AggregateType is the aggregate every saga event belongs to.
const AggregateType = "order"

var insertSQL = `insert into outbox (` + strings.Join(outbox.Columns, ", ") + `) values (` + placeholders(len(outbox.Columns)) + `)`

func placeholders(n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = fmt.Sprintf("$%d", i+1)
	}
	return strings.Join(p, ", ")
}

// Append validates ev against the catalog and inserts it into the outbox
// with tx, exactly as outbox.Append does except for the aggregate type. An
// invalid event is an error wrapping outbox.ErrInvalidEvent; the caller
// rolls back.
func Append(ctx context.Context, tx pgx.Tx, ev outbox.Event) (schemas.Envelope, error) {
	cat, err := schemas.Default()
	if err != nil {
		return schemas.Envelope{}, fmt.Errorf("schema catalog: %w", err)
	}
	entry, err := cat.Lookup(ev.Type)
	if err != nil {
		return schemas.Envelope{}, fmt.Errorf("%w: %w", outbox.ErrInvalidEvent, err)
	}
	version := ev.Version
	if version == 0 {
		version = entry.Latest()
	}
	data, ok := ev.Data.(json.RawMessage)
	if !ok {
		if data, err = json.Marshal(ev.Data); err != nil {
			return schemas.Envelope{}, fmt.Errorf("%w: %s data: %w", outbox.ErrInvalidEvent, ev.Type, err)
		}
	}
	key, err := entry.PartitionKey(data)
	if err != nil {
		return schemas.Envelope{}, fmt.Errorf("%w: %w", outbox.ErrInvalidEvent, err)
	}
	env := schemas.Envelope{
		EventID: schemas.NewEventID(), EventType: ev.Type, EventVersion: version, Timestamp: time.Now().UTC(),
		AggregateType: AggregateType, AggregateID: ev.AggregateID, CorrelationID: ev.CorrelationID,
		CausationID: ev.CausationID, Data: data,
	}
	if env.AggregateID == "" {
		env.AggregateID = key
	}
	if env.CorrelationID == "" {
		env.CorrelationID = env.AggregateID
	}
	payload, err := env.Marshal()
	if err != nil {
		return schemas.Envelope{}, fmt.Errorf("%w: %w", outbox.ErrInvalidEvent, err)
	}
	if err := cat.ValidateAs(ev.Type, version, payload); err != nil {
		return schemas.Envelope{}, fmt.Errorf("%w: event %s: %w", outbox.ErrInvalidEvent, env.EventID, err)
	}
	rec := outbox.Record{
		EventID: env.EventID, AggregateType: env.AggregateType, AggregateID: env.AggregateID,
		PartitionKey: key, KeyHash: outbox.KeyHash(key), Topic: Topic(ctx, entry.Topic), EventType: ev.Type,
		EventVersion: version, Payload: payload, Headers: ev.Headers,
	}
	if _, err := tx.Exec(ctx, insertSQL, rec.Values()...); err != nil {
		return schemas.Envelope{}, fmt.Errorf("outbox append %s event %s: %w", ev.Type, env.EventID, err)
	}
	if _, err := tx.Exec(ctx, "select pg_notify($1, '')", outbox.NotifyChannel); err != nil {
		return schemas.Envelope{}, fmt.Errorf("outbox notify for event %s: %w", env.EventID, err)
	}
	return env, nil
}
