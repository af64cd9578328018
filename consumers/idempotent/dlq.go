package idempotent

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/schemas"
)

// Headers the runner adds to a dead-lettered record, beside the original
// record's own key, value and headers.
const (
	HeaderDLQTopic     = "dlq.original.topic"
	HeaderDLQPartition = "dlq.original.partition"
	HeaderDLQOffset    = "dlq.original.offset"
	HeaderDLQGroup     = "dlq.consumer_group"
	HeaderDLQReason    = "dlq.reason"
	HeaderDLQError     = "dlq.error"
	HeaderDLQTime      = "dlq.failed_at" // RFC 3339, UTC
)

// Header names the runner reads from source records.
const (
	HeaderEventID   = schemas.HeaderEventID
	HeaderEventType = schemas.HeaderEventType
)

// IsDLQHeader reports whether a header was added by the runner when it
// dead-lettered a record (replays strip them).
func IsDLQHeader(key string) bool {
	switch key {
	case HeaderDLQTopic, HeaderDLQPartition, HeaderDLQOffset, HeaderDLQGroup, HeaderDLQReason, HeaderDLQError, HeaderDLQTime:
		return true
	}
	return false
}

// dlqRecord builds the DLQ copy of src: same key, value and headers, plus
// where it came from and why it failed. It keeps src's key so that the DLQ
// preserves per-key order of what failed.
func dlqRecord(group, dlqTopic string, src *kgo.Record, reason string, err error, at time.Time) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(src.Headers)+7)
	hs = append(hs, src.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderDLQTopic, Value: []byte(src.Topic)},
		kgo.RecordHeader{Key: HeaderDLQPartition, Value: []byte(strconv.Itoa(int(src.Partition)))},
		kgo.RecordHeader{Key: HeaderDLQOffset, Value: []byte(strconv.FormatInt(src.Offset, 10))},
		kgo.RecordHeader{Key: HeaderDLQGroup, Value: []byte(group)},
		kgo.RecordHeader{Key: HeaderDLQReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderDLQError, Value: []byte(err.Error())},
		kgo.RecordHeader{Key: HeaderDLQTime, Value: []byte(at.Format(time.RFC3339Nano))},
	)
	return &kgo.Record{Topic: dlqTopic, Key: src.Key, Value: src.Value, Headers: hs}
}

func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
