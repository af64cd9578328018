package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/schemas"
)

// NotifyChannel is the LISTEN/NOTIFY channel Append signals on commit, so a
// relay wakes as soon as rows are visible instead of waiting for its poll.
const NotifyChannel = "concord_outbox"

// Event is what a service hands to Append. The envelope fields the service
// does not decide (event id, timestamp, topic, key) are filled in by Append.
type Event struct {
	Type          string            // catalog event type, e.g. "order.created"
	Version       int               // 0 means the catalog's latest version
	AggregateType string            // "" means the catalog's aggregate type for Type
	Topic         string            // "" means the catalog's topic; set it to route to a prefixed topic (tests, side-by-side runs)
	AggregateID   string            // "" means the partition key
	CorrelationID string            // "" means the aggregate id (the saga is the aggregate's)
	CausationID   string            // event id of the event that caused this one, if any
	Data          any               // marshalled to JSON; json.RawMessage passes through
	Headers       map[string]string // extra record headers (e.g. traceparent)
}

// ErrInvalidEvent wraps every error Append returns for an event the catalog
// refuses (unknown type or version, payload failing its schema, missing key).
// Schema failures also unwrap to *schemas.ValidationError.
var ErrInvalidEvent = errors.New("invalid event")

// Append validates ev against the schema catalog, fills event_id (UUIDv7),
// timestamp, aggregate_type, topic and partition key (from the catalog,
// unless the event names them), inserts the
// row with tx and NOTIFYs the relay (delivered when tx commits).
//
// An invalid event is a programming error: Append returns an error wrapping
// ErrInvalidEvent and the caller must roll back, so the business change
// never commits without its event. Any error leaves tx unusable for further
// statements only if the database said so (a failed insert aborts it).
func Append(ctx context.Context, tx pgx.Tx, ev Event) (schemas.Envelope, error) {
	env, rec, err := Prepare(ev)
	if err != nil {
		return schemas.Envelope{}, err
	}
	if _, err := tx.Exec(ctx, insertSQL, rec.args()...); err != nil {
		return schemas.Envelope{}, fmt.Errorf("outbox append %s event %s: %w", ev.Type, env.EventID, err)
	}
	if _, err := tx.Exec(ctx, notifySQL, NotifyChannel); err != nil {
		return schemas.Envelope{}, fmt.Errorf("outbox notify for event %s: %w", env.EventID, err)
	}
	return env, nil
}

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

// Columns are the outbox columns a Record fills, in Values order (for COPY).
var Columns = []string{"event_id", "aggregate_type", "aggregate_id", "partition_key", "key_hash", "topic",
	"event_type", "event_version", "payload", "headers"}

// Values returns the record's column values in Columns order.
func (r Record) Values() []any { return r.args() }

// Prepare builds and validates the envelope of ev and the outbox row that
// carries it, without touching the database.
func Prepare(ev Event) (schemas.Envelope, Record, error) {
	cat, err := schemas.Default()
	if err != nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("schema catalog: %w", err)
	}
	entry, err := cat.Lookup(ev.Type)
	if err != nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	version := ev.Version
	if version == 0 {
		version = entry.Latest()
	}
	var data json.RawMessage
	switch d := ev.Data.(type) {
	case json.RawMessage:
		data = d
	default:
		if data, err = json.Marshal(d); err != nil {
			return schemas.Envelope{}, Record{}, fmt.Errorf("%w: %s data: %w", ErrInvalidEvent, ev.Type, err)
		}
	}
	key, err := entry.PartitionKey(data)
	if err != nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	env := schemas.Envelope{
		EventID:       schemas.NewEventID(),
		EventType:     ev.Type,
		EventVersion:  version,
		Timestamp:     time.Now().UTC(),
		AggregateType: ev.AggregateType,
		AggregateID:   ev.AggregateID,
		CorrelationID: ev.CorrelationID,
		CausationID:   ev.CausationID,
		Data:          data,
	}
	if env.AggregateType == "" {
		env.AggregateType = entry.AggregateType
	}
	if env.AggregateID == "" {
		env.AggregateID = key
	}
	if env.CorrelationID == "" {
		env.CorrelationID = env.AggregateID
	}
	topic := ev.Topic
	if topic == "" {
		topic = entry.Topic
	}
	payload, err := env.Marshal()
	if err != nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	if err := cat.ValidateAs(ev.Type, version, payload); err != nil {
		return schemas.Envelope{}, Record{}, fmt.Errorf("%w: event %s: %w", ErrInvalidEvent, env.EventID, err)
	}
	return env, Record{
		EventID:       env.EventID,
		AggregateType: env.AggregateType,
		AggregateID:   env.AggregateID,
		PartitionKey:  key,
		KeyHash:       KeyHash(key),
		Topic:         topic,
		EventType:     ev.Type,
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
