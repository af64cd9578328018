// Package schemas is Concord's event contract: the envelope every event
// travels in, the catalog that maps an event type to its topic, partition
// key and compatibility mode, and the versioned JSON Schemas that validate
// each event. It has no Kafka or database code.
package schemas

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Kafka record header names set by the relay and read by consumers.
const (
	HeaderEventID      = "event_id"
	HeaderEventType    = "event_type"
	HeaderEventVersion = "event_version"
	HeaderContentType  = "content-type"
	HeaderTraceparent  = "traceparent"
)

// ContentTypeJSON is the content type of a JSON-encoded envelope.
const ContentTypeJSON = "application/json"

// Envelope is the shape of every event. EventID is a UUIDv7 and is the
// idempotency key consumers deduplicate on; CorrelationID ties the events of
// one saga together and CausationID names the event that caused this one.
type Envelope struct {
	EventID       string          `json:"event_id"`
	EventType     string          `json:"event_type"`
	EventVersion  int             `json:"event_version"`
	Timestamp     time.Time       `json:"timestamp"`
	AggregateType string          `json:"aggregate_type"`
	AggregateID   string          `json:"aggregate_id"`
	CorrelationID string          `json:"correlation_id"`
	CausationID   string          `json:"causation_id,omitempty"`
	Data          json.RawMessage `json:"data"`
}

// NewEventID returns a fresh UUIDv7: time-ordered, so ids of one producer
// sort roughly by creation and index well in Postgres.
func NewEventID() string {
	return uuid.Must(uuid.NewV7()).String()
}

// Marshal encodes the envelope as JSON with the timestamp in RFC 3339 UTC.
func (e Envelope) Marshal() ([]byte, error) {
	e.Timestamp = e.Timestamp.UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode event %s (%s v%d): %w", e.EventID, e.EventType, e.EventVersion, err)
	}
	return b, nil
}

// DecodeEnvelope parses a JSON envelope. It checks only the shape; use
// Catalog.Validate to check the payload against its schema.
func DecodeEnvelope(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return Envelope{}, fmt.Errorf("decode envelope: %w", err)
	}
	return e, nil
}
