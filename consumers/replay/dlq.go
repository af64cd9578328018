package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DeadLetter is a dead_letters row not yet replayed.
type DeadLetter struct {
	ID        int64
	Topic     string
	Partition int32
	Offset    int64
	EventID   string
	EventType string
	Reason    string
	Error     string
	FailedAt  time.Time
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
}

// PendingDeadLetters lists the group's dead letters that were not replayed
// yet, oldest first; only those in ids when ids is not empty.
func PendingDeadLetters(ctx context.Context, pool *pgxpool.Pool, group string, ids []int64) ([]DeadLetter, error) {
	rows, err := pool.Query(ctx, `
SELECT id, topic, partition, "offset", coalesce(event_id, ''), coalesce(event_type, ''), reason, error, failed_at,
       record_key, record_value, record_headers
FROM dead_letters
WHERE consumer_group = $1 AND replayed_at IS NULL AND (coalesce(cardinality($2::bigint[]), 0) = 0 OR id = ANY($2))
ORDER BY id`, group, ids)
	if err != nil {
		return nil, fmt.Errorf("list dead letters of %s: %w", group, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		var hs []byte
		err := row.Scan(&d.ID, &d.Topic, &d.Partition, &d.Offset, &d.EventID, &d.EventType, &d.Reason, &d.Error,
			&d.FailedAt, &d.Key, &d.Value, &hs)
		if err != nil {
			return d, err
		}
		var headers []struct {
			Key   string `json:"key"`
			Value []byte `json:"value"`
		}
		if err := json.Unmarshal(hs, &headers); err != nil {
			return d, fmt.Errorf("dead letter %d: headers: %w", d.ID, err)
		}
		for _, h := range headers {
			d.Headers = append(d.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		return d, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list dead letters of %s: %w", group, err)
	}
	return out, nil
}

// Republish produces the dead letters to their original topics, in id
// order, with their original key, value and headers (the key picks the
// partition, as it did for the original), and then marks them replayed.
// A crash between the two re-publishes them next time; the consumers'
// dedupe makes that harmless.
func Republish(ctx context.Context, cl *kgo.Client, pool *pgxpool.Pool, dls []DeadLetter) error {
	if len(dls) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, len(dls))
	ids := make([]int64, len(dls))
	for i, d := range dls {
		recs[i] = &kgo.Record{Topic: d.Topic, Key: d.Key, Value: d.Value, Headers: d.Headers}
		ids[i] = d.ID
	}
	byRecord := make(map[*kgo.Record]DeadLetter, len(dls))
	for i, r := range recs {
		byRecord[r] = dls[i]
	}
	for _, res := range cl.ProduceSync(ctx, recs...) {
		if res.Err != nil {
			d := byRecord[res.Record]
			return fmt.Errorf("republish dead letter %d (%s-%d@%d, event %s): %w; nothing was marked replayed", d.ID, d.Topic, d.Partition, d.Offset, d.EventID, res.Err)
		}
	}
	if _, err := pool.Exec(ctx, `UPDATE dead_letters SET replayed_at = now() WHERE id = ANY($1)`, ids); err != nil {
		return fmt.Errorf("mark %d dead letters replayed (they were republished): %w", len(ids), err)
	}
	return nil
}
