package eventctl

import (
	"testing"
	"time"
)

func TestStartPlansEachPartition(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := map[int32]Bounds{0: {LogStart: 10, End: 20, AtTime: 15}, 1: {LogStart: 0, End: 5, AtTime: 5}}
	for _, c := range []struct {
		from, offset, since string
		want                map[int32]Range
	}{
		{"beginning", "", "", map[int32]Range{0: {10, 20}, 1: {0, 5}}},
		{"end", "", "", map[int32]Range{0: {20, 20}, 1: {5, 5}}},
		{"end", "12", "", map[int32]Range{0: {12, 20}, 1: {5, 5}}}, // clamped to the log end
		{"end", "3", "", map[int32]Range{0: {10, 20}, 1: {3, 5}}},  // clamped to the log start
		{"end", "1:2", "", map[int32]Range{1: {2, 5}}},             // only the partitions listed
		{"end", "", "2026-12-01T11:00:00Z", map[int32]Range{0: {15, 20}, 1: {5, 5}}},
		{"end", "", "1h", map[int32]Range{0: {15, 20}, 1: {5, 5}}},
	} {
		st, err := ParseStart(c.from, c.offset, c.since, now)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		got := st.Plan(b)
		if len(got) != len(c.want) {
			t.Errorf("%+v: %v, want %v", c, got, c.want)
		}
		for p, r := range c.want {
			if got[p] != r {
				t.Errorf("%+v: partition %d %v, want %v", c, p, got[p], r)
			}
		}
	}
	if st, _ := ParseStart("end", "", "90m", now); !st.Time.Equal(now.Add(-90 * time.Minute)) {
		t.Errorf("--since 90m: %v", st.Time)
	}
	for _, bad := range [][3]string{{"middle", "", ""}, {"end", "-1", ""}, {"end", "0:x", ""}, {"end", "", "yesterday"}, {"end", "1", "1h"}} {
		if _, err := ParseStart(bad[0], bad[1], bad[2], now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
