package eventctl

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Start says where tail begins reading each partition.
type Start struct {
	Kind         string          // "beginning", "end", "offset" or "time"
	Offset       int64           // Kind "offset": the offset of every partition not in PerPartition
	PerPartition map[int32]int64 // Kind "offset": offsets of given partitions ("P:N")
	Time         time.Time       // Kind "time"
}

// ParseStart reads the start flags: --from beginning|end, --offset N or
// P:N,P:N, --since RFC3339 or a duration back from now. At most one of
// --offset and --since may be given; either overrides --from.
func ParseStart(from, offset, since string, now time.Time) (Start, error) {
	if offset != "" && since != "" {
		return Start{}, fmt.Errorf("--offset and --since are exclusive")
	}
	switch {
	case offset != "":
		return parseOffset(offset)
	case since != "":
		if t, err := time.Parse(time.RFC3339Nano, since); err == nil {
			return Start{Kind: "time", Time: t}, nil
		}
		d, err := time.ParseDuration(since)
		if err != nil || d < 0 {
			return Start{}, fmt.Errorf("--since %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a positive duration back from now (15m)", since)
		}
		return Start{Kind: "time", Time: now.Add(-d)}, nil
	}
	switch from {
	case "beginning", "end":
		return Start{Kind: from}, nil
	}
	return Start{}, fmt.Errorf("--from %q: want beginning or end", from)
}

func parseOffset(s string) (Start, error) {
	st := Start{Kind: "offset", Offset: -1}
	if !strings.Contains(s, ":") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return Start{}, fmt.Errorf("--offset %q: want a non-negative offset or partition:offset pairs (0:42,3:7)", s)
		}
		st.Offset = n
		return st, nil
	}
	st.PerPartition = map[int32]int64{}
	for _, pair := range strings.Split(s, ",") {
		p, o, ok := strings.Cut(strings.TrimSpace(pair), ":")
		pn, err1 := strconv.ParseInt(p, 10, 32)
		on, err2 := strconv.ParseInt(o, 10, 64)
		if !ok || err1 != nil || err2 != nil || pn < 0 || on < 0 {
			return Start{}, fmt.Errorf("--offset %q: %q is not partition:offset", s, pair)
		}
		st.PerPartition[int32(pn)] = on
	}
	return st, nil
}

// Bounds are a partition's offsets when tail starts: the log start, the
// log end (the next offset to be written) and, for a Start of Kind
// "time", the first offset at or after the time (End when none is).
type Bounds struct {
	LogStart, End, AtTime int64
}

// Range is what tail reads of one partition: from From up to, without
// following, End (exclusive).
type Range struct{ From, End int64 }

// Plan decides where each partition starts. A partition absent from an
// offset list given per partition is not read; an offset outside the log
// is clamped to it.
func (s Start) Plan(bounds map[int32]Bounds) map[int32]Range {
	out := map[int32]Range{}
	for p, b := range bounds {
		var from int64
		switch s.Kind {
		case "beginning":
			from = b.LogStart
		case "end":
			from = b.End
		case "time":
			from = b.AtTime
		case "offset":
			from = s.Offset
			if s.PerPartition != nil {
				o, ok := s.PerPartition[p]
				if !ok {
					continue
				}
				from = o
			}
		}
		from = max(b.LogStart, min(from, b.End))
		out[p] = Range{From: from, End: b.End}
	}
	return out
}
