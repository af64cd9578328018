// Package sagaevent appends the saga's events to a service's outbox under
// the topic prefix the service runs with.
//
// Every saga event (order.*, inventory.*, payment.*) belongs to the order
// aggregate: the catalog says so and the schemas pin aggregate_type to
// "order"; its partition key is the order id, so all events of one order stay
// in order on their topics. outbox.Append takes both from the catalog; this
// package only adds the prefix that keeps tests and side-by-side runs apart
// on a shared broker.
package sagaevent

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas"
)

type prefixKey struct{}

// WithTopicPrefix returns a context under which Append writes events to
// prefix + the catalog's topic. The services take it from --topic-prefix.
func WithTopicPrefix(ctx context.Context, prefix string) context.Context {
	return context.WithValue(ctx, prefixKey{}, prefix)
}

// Topic is the topic events of the given catalog topic go to under ctx.
func Topic(ctx context.Context, topic string) string {
	p, _ := ctx.Value(prefixKey{}).(string)
	return p + topic
}

// Append is outbox.Append with the topic prefix of ctx applied; under a
// context from WithBuffer it buffers the event instead. An invalid event is
// an error wrapping outbox.ErrInvalidEvent; the caller rolls back.
func Append(ctx context.Context, tx pgx.Tx, ev outbox.Event) (schemas.Envelope, error) {
	ev, err := route(ctx, ev)
	if err != nil {
		return schemas.Envelope{}, err
	}
	if b, ok := ctx.Value(bufferKey{}).(*outbox.Buffer); ok {
		return b.Add(ev)
	}
	return outbox.Append(ctx, tx, ev)
}

// Queue is outbox.Queue with the topic prefix of ctx applied.
func Queue(ctx context.Context, b *pgx.Batch, ev outbox.Event) (schemas.Envelope, error) {
	ev, err := route(ctx, ev)
	if err != nil {
		return schemas.Envelope{}, err
	}
	return outbox.Queue(b, ev)
}

// route points ev at its catalog topic under the prefix of ctx.
func route(ctx context.Context, ev outbox.Event) (outbox.Event, error) {
	entry, err := schemas.MustDefault().Lookup(ev.Type)
	if err != nil {
		return ev, fmt.Errorf("%w: %w", outbox.ErrInvalidEvent, err)
	}
	ev.Topic = Topic(ctx, entry.Topic)
	return ev, nil
}
