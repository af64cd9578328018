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
	"strings"

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

// Append is outbox.Append with the topic prefix of ctx applied. An invalid
// event is an error wrapping outbox.ErrInvalidEvent; the caller rolls back.
func Append(ctx context.Context, tx pgx.Tx, ev outbox.Event) (schemas.Envelope, error) {
	entry, err := schemas.MustDefault().Lookup(ev.Type)
	if err != nil {
		return schemas.Envelope{}, fmt.Errorf("%w: %w", outbox.ErrInvalidEvent, err)
	}
	ev.Topic = Topic(ctx, entry.Topic)
	if b, ok := ctx.Value(bufferKey{}).(*Buffer); ok {
		return b.add(ev)
	}
	return outbox.Append(ctx, tx, ev)
}

// insertSQL inserts one outbox row from outbox.Record.Values.
var insertSQL = func() string {
	s := "insert into outbox (" + strings.Join(outbox.Columns, ", ") + ") values ("
	for i := range outbox.Columns {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("$%d", i+1)
	}
	return s + ")"
}()

// Queue is Append for a caller that sends its statements as one pgx.Batch:
// it validates ev and queues its outbox insert and the relay's NOTIFY on b,
// so writing the event costs no round trip of its own. Send b within the
// transaction of the change the event reports.
func Queue(ctx context.Context, b *pgx.Batch, ev outbox.Event) (schemas.Envelope, error) {
	entry, err := schemas.MustDefault().Lookup(ev.Type)
	if err != nil {
		return schemas.Envelope{}, fmt.Errorf("%w: %w", outbox.ErrInvalidEvent, err)
	}
	ev.Topic = Topic(ctx, entry.Topic)
	env, rec, err := outbox.Prepare(ev)
	if err != nil {
		return schemas.Envelope{}, err
	}
	b.Queue(insertSQL, rec.Values()...)
	b.Queue("select pg_notify($1, '')", outbox.NotifyChannel)
	return env, nil
}
