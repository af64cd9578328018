// Package replay resets a consumer group's offsets so that its records are
// delivered again, with the same choice of new offsets as Apache Kafka's
// kafka-consumer-groups.sh --reset-offsets; clears the group's dedupe rows
// for the replayed range when handlers must run again (reprocess); and
// re-publishes dead-lettered records after a fix.
//
// The decision of each partition's new offset is the pure function
// NewOffset; the rest of the package gathers its inputs from the cluster and
// applies its output.
package replay

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Strategy is how the new offset of a partition is chosen.
type Strategy int

// The strategies of kafka-consumer-groups.sh --reset-offsets.
const (
	ToEarliest Strategy = iota + 1 // the log start offset
	ToLatest                       // the log end offset
	ToCurrent                      // the committed offset; the log end offset if none
	ToOffset                       // Spec.Offset, clamped to [start, end]
	ShiftBy                        // committed + Spec.Offset, clamped to [start, end]; error if none committed
	ToDatetime                     // first offset with timestamp >= Spec.Time; the log end offset if none
	ByDuration                     // as ToDatetime with now - duration
	FromFile                       // Partition.Requested (a --from-file plan), clamped to [start, end]
)

func (s Strategy) String() string {
	switch s {
	case ToEarliest:
		return "to-earliest"
	case ToLatest:
		return "to-latest"
	case ToCurrent:
		return "to-current"
	case ToOffset:
		return "to-offset"
	case ShiftBy:
		return "shift-by"
	case ToDatetime:
		return "to-datetime"
	case ByDuration:
		return "by-duration"
	case FromFile:
		return "from-file"
	}
	return "unknown"
}

// Spec is a reset request: the strategy and its argument.
type Spec struct {
	Strategy Strategy
	Offset   int64     // ToOffset: the offset; ShiftBy: the shift
	Time     time.Time // ToDatetime and ByDuration (already resolved against now)
	Note     string    // how a surprising --to-datetime was read (ParseDateTime), to show the user
}

// Partition is what the cluster says of one partition: its log start and
// end offsets, the group's committed offset (Committed < 0 when none), and
// for time-based strategies the first offset at or after Spec.Time
// (AtTime < 0 when no record is that recent); for FromFile the offset the
// file asks for.
type Partition struct {
	Topic     string
	Partition int32
	Start     int64
	End       int64
	Committed int64
	AtTime    int64
	Requested int64
}

// NewOffset decides the partition's new offset exactly as Apache Kafka's
// GroupOffsetsResetter does for the same option.
func NewOffset(s Spec, p Partition) (int64, error) {
	switch s.Strategy {
	case ToEarliest:
		return p.Start, nil
	case ToLatest:
		return p.End, nil
	case ToCurrent:
		if p.Committed >= 0 {
			return p.Committed, nil
		}
		return p.End, nil
	case ToOffset:
		return clamp(s.Offset, p.Start, p.End), nil
	case FromFile:
		return clamp(p.Requested, p.Start, p.End), nil
	case ShiftBy:
		if p.Committed < 0 {
			return 0, fmt.Errorf("cannot shift offset for partition %s-%d since there is no current committed offset", p.Topic, p.Partition)
		}
		return clamp(addSaturating(p.Committed, s.Offset), p.Start, p.End), nil
	case ToDatetime, ByDuration:
		if p.AtTime >= 0 {
			return p.AtTime, nil
		}
		return p.End, nil
	}
	return 0, fmt.Errorf("unknown reset strategy %d", s.Strategy)
}

// clamp keeps an offset inside the log, checking the end first as Apache's
// checkOffsetsRange does.
func clamp(off, start, end int64) int64 {
	if off > end {
		return end
	}
	if off < start {
		return start
	}
	return off
}

func addSaturating(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return 1<<63 - 1
	}
	if b < 0 && s > a {
		return -1 << 63
	}
	return s
}

var isoDuration = regexp.MustCompile(`^([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$`)

// ParseDuration parses --by-duration as java.time.Duration.parse does
// (PnDTnHnMn.nS, e.g. PT15M, P1DT2H, PT0.5S; a day is 24 hours). A Go
// duration (15m, 1h30m) is accepted as well.
func ParseDuration(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(strings.ToUpper(s))
	if m == nil || s == "P" || strings.HasSuffix(strings.ToUpper(s), "T") {
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		return 0, fmt.Errorf("--by-duration %q: want an ISO-8601 duration such as PT15M or P1DT2H", s)
	}
	if m[2] == "" && m[3] == "" && m[4] == "" && m[5] == "" {
		return 0, fmt.Errorf("--by-duration %q: no amount", s)
	}
	num := func(v string) int64 { n, _ := strconv.ParseInt(v, 10, 64); return n }
	d := time.Duration(num(m[2]))*24*time.Hour + time.Duration(num(m[3]))*time.Hour + time.Duration(num(m[4]))*time.Minute
	secs := time.Duration(num(m[5])) * time.Second
	if m[6] != "" {
		frac := (m[6] + "000000000")[:9]
		ns := time.Duration(num(frac))
		if strings.HasPrefix(m[5], "-") {
			ns = -ns
		}
		secs += ns
	}
	d += secs
	if m[1] == "-" {
		d = -d
	}
	return d, nil
}

// ErrGroupActive is returned when a reset is asked for while the group has
// members: their in-memory positions would overwrite the reset.
var ErrGroupActive = errors.New("group is active")
