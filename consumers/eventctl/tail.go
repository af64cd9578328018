package eventctl

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bounds lists the log start, log end and (for a start in time) the
// offset at the time of every partition of the topics.
func bounds(ctx context.Context, adm *kadm.Client, topics []string, st Start) (map[string]map[int32]Bounds, error) {
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %v: %w", topics, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list offsets of %v: %w", topics, err)
	}
	var at kadm.ListedOffsets
	if st.Kind == "time" {
		if at, err = adm.ListOffsetsAfterMilli(ctx, st.Time.UnixMilli(), topics...); err == nil {
			err = at.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("list offsets of %v at %s: %w", topics, st.Time.Format(time.RFC3339), err)
		}
	}
	out := map[string]map[int32]Bounds{}
	for _, t := range topics {
		if len(ends[t]) == 0 {
			return nil, fmt.Errorf("topic %s does not exist", t)
		}
		out[t] = map[int32]Bounds{}
		for p, e := range ends[t] {
			b := Bounds{LogStart: starts[t][p].Offset, End: e.Offset, AtTime: e.Offset}
			if o, ok := at.Lookup(t, p); ok && o.Offset >= 0 {
				b.AtTime = o.Offset
			}
			out[t][p] = b
		}
	}
	return out, nil
}

// DefaultIdleEnd is how long tail without --follow waits for a record
// before it takes a partition's remaining offsets for ones that hold no
// record (transaction markers, compacted away).
const DefaultIdleEnd = 5 * time.Second

// tail consumes the ranges and hands every kept event to print, until
// every partition reached the end it had when tail started (unless
// follow), max events were printed (0: no limit), or ctx ends. Without
// follow, a poll that brings nothing for idleEnd ends it too; the
// partitions it stopped short of are returned ("topic/partition"), so
// the caller can say so: a slow broker looks the same as offsets that
// hold no record.
func tail(ctx context.Context, cl *kgo.Client, ranges map[string]map[int32]Range, follow bool, maxEvents int,
	idleEnd time.Duration, codec Codec, filter Filter, print func(Event) error) (int, []string, error) {
	offsets := map[string]map[int32]kgo.Offset{}
	pending := map[string]map[int32]int64{} // partitions still to read up to their end
	for t, ps := range ranges {
		offsets[t] = map[int32]kgo.Offset{}
		for p, r := range ps {
			offsets[t][p] = kgo.NewOffset().At(r.From)
			if r.From < r.End {
				if pending[t] == nil {
					pending[t] = map[int32]int64{}
				}
				pending[t][p] = r.End
			}
		}
	}
	cl.AddConsumePartitions(offsets)
	printed := 0
	left := func() int {
		n := 0
		for _, ps := range pending {
			n += len(ps)
		}
		return n
	}
	for follow || left() > 0 {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if !follow {
			pctx, cancel = context.WithTimeout(ctx, idleEnd)
		}
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return printed, nil, nil
		}
		if fetches.IsClientClosed() {
			return printed, nil, errors.New("kafka client closed")
		}
		if pctx.Err() != nil && fetches.NumRecords() == 0 {
			var short []string
			for t, ps := range pending {
				for p := range ps {
					short = append(short, fmt.Sprintf("%s/%d", t, p))
				}
			}
			sort.Strings(short)
			return printed, short, nil
		}
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return printed, nil, fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		var err error
		fetches.EachRecord(func(rec *kgo.Record) {
			if err != nil || (maxEvents > 0 && printed >= maxEvents) {
				return
			}
			if end, ok := pending[rec.Topic][rec.Partition]; ok && rec.Offset+1 >= end {
				delete(pending[rec.Topic], rec.Partition)
			}
			if end, ok := ranges[rec.Topic][rec.Partition]; ok && !follow && rec.Offset >= end.End {
				return
			}
			ev := codec.Decode(toRecord(rec))
			if !filter.Keep(ev) {
				return
			}
			if err = print(ev); err == nil {
				printed++
			}
		})
		if err != nil {
			return printed, nil, err
		}
		if maxEvents > 0 && printed >= maxEvents {
			return printed, nil, nil
		}
	}
	return printed, nil, nil
}

func toRecord(r *kgo.Record) Record {
	h := make(map[string]string, len(r.Headers))
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	return Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Time: r.Timestamp, Key: string(r.Key), Value: r.Value, Headers: h}
}
