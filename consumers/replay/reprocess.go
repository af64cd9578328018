package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/concordhq/concord/schemas"
)

// ReadEventIDs reads every record in the replayed range of each row,
// [New, End), and returns the distinct event ids found in them (from the
// envelope, else the event_id header). The range runs to the log end, not
// just to the committed offset: a consumer that died after its database
// commit and before its offset commit has dedupe rows beyond the committed
// offset, and those events are replayed too.
//
// A partition that yields no record for idle is taken as read to its end
// (transaction markers or compaction can leave the last offsets empty);
// ReadEventIDs reports such partitions in short.
func ReadEventIDs(ctx context.Context, conn []kgo.Opt, rows []Row, idle time.Duration) (ids []uuid.UUID, short []string, err error) {
	want := map[string]map[int32]kgo.Offset{}
	last := map[tp]int64{}
	for _, r := range rows {
		if r.New >= r.End {
			continue
		}
		if want[r.Topic] == nil {
			want[r.Topic] = map[int32]kgo.Offset{}
		}
		want[r.Topic][r.Partition] = kgo.NewOffset().At(r.New)
		last[tp{r.Topic, r.Partition}] = r.End - 1
	}
	if len(last) == 0 {
		return nil, nil, nil
	}
	cl, err := kgo.NewClient(append(conn, kgo.ConsumePartitions(want))...)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()

	seen := map[uuid.UUID]bool{}
	for len(last) > 0 {
		pctx, cancel := context.WithTimeout(ctx, idle)
		fetches := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if fetches.Empty() {
			for k := range last {
				short = append(short, fmt.Sprintf("%s-%d", k.topic, k.partition))
			}
			sort.Strings(short)
			break
		}
		var ferr error
		fetches.EachError(func(topic string, p int32, err error) {
			if err != context.DeadlineExceeded {
				ferr = fmt.Errorf("read %s-%d: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return nil, nil, ferr
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			k := tp{rec.Topic, rec.Partition}
			end, ok := last[k]
			if !ok || rec.Offset > end {
				return
			}
			if id, ok := eventID(rec); ok {
				seen[id] = true
			}
			if rec.Offset == end {
				delete(last, k)
			}
		})
	}
	ids = make([]uuid.UUID, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
	return ids, short, nil
}

func eventID(rec *kgo.Record) (uuid.UUID, bool) {
	var head struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(rec.Value, &head) == nil {
		if id, err := uuid.Parse(head.EventID); err == nil {
			return id, true
		}
	}
	for _, h := range rec.Headers {
		if h.Key == schemas.HeaderEventID {
			if id, err := uuid.Parse(string(h.Value)); err == nil {
				return id, true
			}
		}
	}
	return uuid.UUID{}, false
}

const deleteChunk = 10000

// CountProcessed says how many of ids the group has dedupe rows for: what
// Reprocess would delete.
func CountProcessed(ctx context.Context, pool *pgxpool.Pool, group string, ids []uuid.UUID) (int64, error) {
	var total int64
	for i := 0; i < len(ids); i += deleteChunk {
		var n int64
		err := pool.QueryRow(ctx, `SELECT count(*) FROM processed_events WHERE consumer_group = $1 AND event_id = ANY($2)`,
			group, ids[i:min(i+deleteChunk, len(ids))]).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("count processed events of %s: %w", group, err)
		}
		total += n
	}
	return total, nil
}

// Reprocess deletes the group's dedupe rows for ids and, inside the same
// transaction, calls commitOffsets; the deletion commits only if the offsets
// were committed, so a failed reset leaves the dedupe rows in place. It
// returns the number of rows deleted.
func Reprocess(ctx context.Context, pool *pgxpool.Pool, group string, ids []uuid.UUID, commitOffsets func() error) (int64, error) {
	var total int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for i := 0; i < len(ids); i += deleteChunk {
			tag, err := tx.Exec(ctx, `DELETE FROM processed_events WHERE consumer_group = $1 AND event_id = ANY($2)`,
				group, ids[i:min(i+deleteChunk, len(ids))])
			if err != nil {
				return fmt.Errorf("delete processed events of %s: %w", group, err)
			}
			total += tag.RowsAffected()
		}
		return commitOffsets()
	})
	if err != nil {
		return 0, err
	}
	return total, nil
}
