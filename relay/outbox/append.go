package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/schemas"
	"github.com/concordhq/concord/schemas/contract"
)

// NotifyChannel is the LISTEN/NOTIFY channel Append signals on commit, so a
// relay wakes as soon as rows are visible instead of waiting for its poll.
// Append's payload is the row's KeyHash in decimal, so a relay wakes only
// the worker reading that key's shard; an empty payload (a bulk write, a
// row set free) means any shard may have rows.
const NotifyChannel = "concord_outbox"

// Event is what a service hands to Append: a generated payload of
// schemas/contract, which names the event type, version, topic and partition
// key, and the envelope fields the payload does not decide. Append fills the
// rest (event id, timestamp, aggregate type).
type Event struct {
	Payload       contract.Payload
	AggregateID   string            // "" means the partition key
	CorrelationID string            // "" means the aggregate id (the saga is the aggregate's)
	CausationID   string            // event id of the event that caused this one, if any
	Headers       map[string]string // extra record headers (e.g. traceparent)
}

// CausedBy is the event with payload p caused by cause: it carries cause's
// correlation id and names cause as its causation, which is how a handler
// emits the next step of a saga.
func CausedBy(cause schemas.Envelope, p contract.Payload) Event {
	return Event{Payload: p, CorrelationID: cause.CorrelationID, CausationID: cause.EventID}
}

// ErrInvalidEvent wraps every error Append returns for an event the catalog
// refuses (no payload, unknown type or version, payload failing its schema,
// missing key). Schema failures also unwrap to *schemas.ValidationError.
var ErrInvalidEvent = errors.New("invalid event")

// Writer appends events to the outbox table. Its zero value routes each
// event to its catalog topic; a TopicPrefix keeps tests and side-by-side
// runs apart on a shared broker. It is a value: copy it freely.
type Writer struct {
	// TopicPrefix is put before every catalog topic ("" in production).
	TopicPrefix string
	// NoWake appends without the NOTIFY that wakes polling relays. Set it
	// when the outbox is relayed with relay --mode wal, which reads each
	// commit from the WAL and listens for nothing. A transaction that
	// notifies holds PostgreSQL's one notification lock from its commit
	// until the commit is flushed, so notifying commits of the whole
	// server wait for each other: on a 2-core machine, eight clients
	// committed 1,100 single-row inserts a second with the NOTIFY and
	// 3,900 without it.
	NoWake bool
}

// Append is Writer{}.Append: the event goes to its catalog topic.
func Append(ctx context.Context, tx pgx.Tx, ev Event) (schemas.Envelope, error) {
	return Writer{}.Append(ctx, tx, ev)
}

// Append validates ev against the schema catalog, fills event_id (UUIDv7),
// timestamp, aggregate_type, topic and partition key, inserts the row with
// tx and NOTIFYs the relay (delivered when tx commits; not with NoWake).
// The row keeps the
// traceparent of ctx's span, if any (see Traced).
//
// An invalid event is a programming error: Append returns an error wrapping
// ErrInvalidEvent and the caller must roll back, so the business change
// never commits without its event. Any error leaves tx unusable for further
// statements only if the database said so (a failed insert aborts it).
func (w Writer) Append(ctx context.Context, tx pgx.Tx, ev Event) (schemas.Envelope, error) {
	env, rec, err := w.Prepare(Traced(ctx, ev))
	if err != nil {
		return schemas.Envelope{}, err
	}
	sql, args := w.insert(rec)
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return schemas.Envelope{}, fmt.Errorf("outbox append %s event %s: %w", rec.EventType, env.EventID, err)
	}
	return env, nil
}

// insert is the statement that appends rec, and its arguments: with the
// relay's NOTIFY, or without it for NoWake.
func (w Writer) insert(rec Record) (string, []any) {
	if w.NoWake {
		return insertSQL, rec.args()
	}
	return insertNotifySQL, rec.notifyArgs()
}

// insertNotifySQL inserts a row and NOTIFYs the relays in one statement:
// the notification is the transaction's like a separate pg_notify's
// (delivered at commit, folded with the others of the transaction that
// name the same key hash), and an event costs one statement instead of two.
const insertNotifySQL = `with appended as (` + insertSQL + ` returning 1)
select pg_notify($11, $12) from appended`

const insertSQL = `insert into outbox
 (event_id, aggregate_type, aggregate_id, partition_key, key_hash, topic, event_type, event_version, payload, headers)
 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

// Record is an outbox row as Append would insert it. Prepare exposes it so
// bulk loaders (benchmarks, imports) can COPY validated rows.
type Record struct {
	EventID       string
	AggregateType string
	AggregateID   string
	PartitionKey  string
	KeyHash       int32
	Topic         string
	EventType     string
	EventVersion  int
	Payload       []byte // the validated envelope, JSON
	Headers       map[string]string
}

func (r Record) args() []any {
	h := r.Headers
	if h == nil {
		h = map[string]string{}
	}
	return []any{r.EventID, r.AggregateType, r.AggregateID, r.PartitionKey, r.KeyHash, r.Topic,
		r.EventType, r.EventVersion, string(r.Payload), h}
}

// notifyArgs are args, the channel and the payload (the key hash),
// insertNotifySQL's arguments.
func (r Record) notifyArgs() []any {
	return append(r.args(), NotifyChannel, strconv.FormatInt(int64(r.KeyHash), 10))
}

// Columns are the outbox columns a Record fills, in Values order (for COPY).
var Columns = []string{"event_id", "aggregate_type", "aggregate_id", "partition_key", "key_hash", "topic",
	"event_type", "event_version", "payload", "headers"}

// Values returns the record's column values in Columns order.
func (r Record) Values() []any { return r.args() }

// Prepare is Writer{}.Prepare.
func Prepare(ev Event) (schemas.Envelope, Record, error) { return Writer{}.Prepare(ev) }

// Prepare builds and validates the envelope of ev and the outbox row that
// carries it, without touching the database.
func (w Writer) Prepare(ev Event) (schemas.Envelope, Record, error) {
	if ev.Payload == nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: no payload", ErrInvalidEvent)
	}
	typ, version := ev.Payload.EventType(), ev.Payload.EventVersion()
	if !typ.Known() {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: %w %q", ErrInvalidEvent, schemas.ErrUnknownType, typ)
	}
	key := ev.Payload.PartitionKey()
	if key == "" {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: %s has an empty partition key", ErrInvalidEvent, typ)
	}
	data, err := json.Marshal(ev.Payload)
	if err != nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: %s data: %w", ErrInvalidEvent, typ, err)
	}
	env := schemas.Envelope{
		EventID:       schemas.NewEventID(),
		EventType:     string(typ),
		EventVersion:  version,
		Timestamp:     time.Now().UTC(),
		AggregateType: typ.AggregateType(),
		AggregateID:   ev.AggregateID,
		CorrelationID: ev.CorrelationID,
		CausationID:   ev.CausationID,
		Data:          data,
	}
	if env.AggregateID == "" {
		env.AggregateID = key
	}
	if env.CorrelationID == "" {
		env.CorrelationID = env.AggregateID
	}
	payload, err := env.Marshal()
	if err != nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	cat, err := schemas.Default()
	if err != nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("schema catalog: %w", err)
	}
	if err := cat.ValidateAs(env.EventType, version, payload); err != nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: event %s: %w", ErrInvalidEvent, env.EventID, err)
	}
	return env, Record{
		EventID:       env.EventID,
		AggregateType: env.AggregateType,
		AggregateID:   env.AggregateID,
		PartitionKey:  key,
		KeyHash:       KeyHash(key),
		Topic:         w.TopicPrefix + typ.Topic(),
		EventType:     env.EventType,
		EventVersion:  version,
		Payload:       payload,
		Headers:       ev.Headers,
	}, nil
}

// KeyHash is the 31-bit FNV-1a hash of a partition key stored with each row.
// Relays shard rows by KeyHash % shard count; it must never change, or rows
// already written would move shards under a running relay.
func KeyHash(key string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int32(h.Sum32() & 0x7fffffff)
}
