package publisher

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/concordhq/concord/relay/outbox"
)

func TestSendableKeepsEachKeyBehindItsEarlierPendingRows(t *testing.T) {
	c := func(id int64, k string) Candidate { return Candidate{ID: id, Key: k} }
	cases := []struct {
		name    string
		cands   []Candidate
		pending map[string][]int64
		want    []bool
	}{
		{"all rows of the keys are here", []Candidate{c(1, "a"), c(2, "b"), c(3, "a")},
			map[string][]int64{"a": {1, 3}, "b": {2}}, []bool{true, true, true}},
		{"an earlier row of a is elsewhere (in flight, backoff, parked)", []Candidate{c(5, "a"), c(6, "b")},
			map[string][]int64{"a": {2, 5}, "b": {6}}, []bool{false, true}},
		{"a gap in the middle of a key blocks the rest of the key", []Candidate{c(1, "a"), c(4, "a"), c(7, "a")},
			map[string][]int64{"a": {1, 3, 4, 7}}, []bool{true, false, false}},
		{"a later row returns after the gap: still blocked", []Candidate{c(1, "a"), c(9, "a")},
			map[string][]int64{"a": {1, 5, 9}}, []bool{true, false}},
		{"the first row of a key is locked by another batch: none of the key goes, the keys around it do",
			[]Candidate{c(2, "b"), c(3, "a"), c(4, "c"), c(5, "a"), c(6, "b"), c(8, "a")},
			map[string][]int64{"a": {1, 3, 5, 8}, "b": {2, 6}, "c": {4}}, []bool{true, false, true, false, true, false}},
		{"a middle row of a key is locked by another batch: the rows before it go, none after",
			[]Candidate{c(1, "a"), c(2, "a"), c(4, "b"), c(5, "a"), c(6, "a")},
			map[string][]int64{"a": {1, 2, 3, 5, 6}, "b": {4}}, []bool{true, true, true, false, false}},
		{"two keys each behind a row locked elsewhere",
			[]Candidate{c(3, "a"), c(4, "b"), c(5, "c")},
			map[string][]int64{"a": {1, 3}, "b": {2, 4}, "c": {5}}, []bool{false, false, true}},
		{"key missing from pending (published meanwhile): conservative", []Candidate{c(1, "a")},
			map[string][]int64{}, []bool{false}},
		{"empty batch", nil, nil, []bool{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sendable(tc.cands, tc.pending); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSettleNeverPublishesARowAfterAFailureOfItsKey(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name      string
		keys      []string
		errs      []error
		want      []Verdict
		overtaken int
	}{
		{"all acked", []string{"a", "b", "a"}, []error{nil, nil, nil}, []Verdict{Publish, Publish, Publish}, 0},
		{"first of a fails: later a held, b goes", []string{"a", "b", "a", "a"}, []error{boom, nil, boom, boom},
			[]Verdict{Fail, Publish, Hold, Hold}, 0},
		{"a later a acked after its key failed is held and counted", []string{"a", "a"}, []error{boom, nil},
			[]Verdict{Fail, Hold}, 1},
		{"failure in the middle of a key", []string{"a", "a", "a"}, []error{nil, boom, nil},
			[]Verdict{Publish, Fail, Hold}, 1},
		{"independent failures per key", []string{"a", "b"}, []error{boom, boom}, []Verdict{Fail, Fail}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, over := Settle(tc.keys, tc.errs)
			if !reflect.DeepEqual(got, tc.want) || over != tc.overtaken {
				t.Fatalf("got %v (overtaken %d), want %v (%d)", got, over, tc.want, tc.overtaken)
			}
		})
	}
}

func TestParkOnlyRefusedRowsThatRanOutOfAttempts(t *testing.T) {
	cases := []struct {
		attempts, max int
		refused       bool
		want          bool
	}{
		{4, 5, true, false}, {5, 5, true, true}, {9, 5, true, true},
		{50, 5, false, false}, // broker down for long: keep trying, never park
		{100, 0, true, false}, // parking disabled
	}
	for _, c := range cases {
		if got := Park(c.attempts, c.max, c.refused); got != c.want {
			t.Errorf("Park(%d, %d, %v) = %v, want %v", c.attempts, c.max, c.refused, got, c.want)
		}
	}
}

func TestRefusedTellsRecordErrorsFromTransientOnes(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{kerr.MessageTooLarge, true},
		{fmt.Errorf("row 4: %w", kerr.MessageTooLarge), true},
		{kerr.TopicAuthorizationFailed, true},
		{kerr.NotLeaderForPartition, false},
		{kerr.RequestTimedOut, false},
		{context.DeadlineExceeded, false},
		{errors.New("unexpected EOF"), false},
		{nil, false},
	}
	for _, c := range cases {
		if got := Refused(c.err); got != c.want {
			t.Errorf("Refused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestShardOfIsStablePerKeyAndCoversAllShards(t *testing.T) {
	const shards = 16
	seen := map[int]bool{}
	for i := 0; i < 2000; i++ {
		key := fmt.Sprintf("order-%d", i)
		s := ShardOf(outbox.KeyHash(key), shards)
		if s < 0 || s >= shards {
			t.Fatalf("key %s: shard %d out of range", key, s)
		}
		if ShardOf(outbox.KeyHash(key), shards) != s {
			t.Fatalf("key %s: shard not stable", key)
		}
		seen[s] = true
	}
	if len(seen) != shards {
		t.Fatalf("2000 keys hit %d of %d shards", len(seen), shards)
	}
}

// The hash and the shard of a key are pinned to literal values, worked out
// apart from this code (FNV-1a, 32 bits, offset basis 2166136261, prime
// 16777619, top bit cleared): changing either would move the rows already
// written between the shards of a running fleet.
func TestShardOfIsPinnedToFNV1a(t *testing.T) {
	cases := []struct {
		key   string
		hash  int32
		shard int // of 64
	}{
		{"", 18652613, 5},          // the offset basis, 0x811c9dc5, top bit cleared
		{"a", 1678518572, 44},      // 0xe40c292c: the top bit is cleared
		{"order-1", 729795949, 45}, // 0x2b7fcd6d
		{"0d5f1a2e-7b39-4c1e-9a57-3f6b2c8e4d10", 483133651, 19}, // an order id
	}
	for _, c := range cases {
		if h := outbox.KeyHash(c.key); h != c.hash {
			t.Errorf("KeyHash(%q) = %d, want %d", c.key, h, c.hash)
		}
		if s := ShardOf(c.hash, 64); s != c.shard {
			t.Errorf("ShardOf(%d, 64) = %d, want %d", c.hash, s, c.shard)
		}
	}
}

func TestFairShareCoversEveryShard(t *testing.T) {
	cases := []struct{ shards, members, want int }{
		{64, 1, 64}, {64, 2, 32}, {64, 3, 22}, {64, 0, 64}, {4, 8, 1},
	}
	for _, c := range cases {
		got := FairShare(c.shards, c.members)
		if got != c.want || got*max(c.members, 1) < c.shards {
			t.Errorf("FairShare(%d, %d) = %d, want %d", c.shards, c.members, got, c.want)
		}
	}
}
