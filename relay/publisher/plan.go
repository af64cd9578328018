package publisher

import (
	"context"
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
)

// This file holds the relay's decisions as plain functions: which rows of a
// batch may be produced, what to do with each row once the broker answered,
// how long a failed row waits, when it is parked, and which shard a key
// belongs to. They do no I/O; batch.go applies them.

// Candidate is a row the batch query returned (and locked), in id order.
type Candidate struct {
	ID  int64
	Key string // partition key
}

// Sendable says which candidates may be produced now. pending holds, per
// partition key of the batch, the ascending ids of every unpublished,
// unskipped row of that key up to the batch's highest id, whoever holds it
// (parked rows, rows in backoff, rows locked by another relay's batch).
//
// A row may be produced only if every earlier pending row of its key is in
// this batch and may be produced too: so for each key the answer is the
// longest prefix of its candidates that equals the prefix of its pending
// ids. Anything else would let a row overtake an earlier row of its key
// that is failing, parked or in flight elsewhere.
func Sendable(cands []Candidate, pending map[string][]int64) []bool {
	out := make([]bool, len(cands))
	next := make(map[string]int, len(pending)) // index into pending[key] the key's next candidate must match
	blocked := make(map[string]bool)
	for i, c := range cands {
		if blocked[c.Key] {
			continue
		}
		ids := pending[c.Key]
		j := next[c.Key]
		if j >= len(ids) || ids[j] != c.ID {
			blocked[c.Key] = true
			continue
		}
		next[c.Key] = j + 1
		out[i] = true
	}
	return out
}

// Verdict is what happens to a produced row once every record of the batch
// has its answer.
type Verdict int

const (
	// Publish: acknowledged, and every earlier row of its key in the batch
	// was acknowledged too. Marked published.
	Publish Verdict = iota
	// Fail: the first failed row of its key in the batch. It backs off (and
	// may be parked); its key waits behind it.
	Fail
	// Hold: a later row of a key whose earlier row failed in this batch. It
	// stays pending, untouched, and goes after the failed row succeeds. If
	// it was acknowledged anyway the broker holds it out of order; Settle
	// reports that so it can be counted.
	Hold
)

// Settle turns the broker's answers for the produced rows (in id order,
// errs[i] nil for an acknowledgement) into verdicts, and counts rows that
// were acknowledged after an earlier row of their key failed. franz-go fails
// every later record of a partition once one fails, so that count should be
// zero; the relay still never marks such a row, so the key's order in the
// outbox is kept and the row is sent again after the failed one.
func Settle(keys []string, errs []error) (verdicts []Verdict, overtaken int) {
	verdicts = make([]Verdict, len(keys))
	failed := make(map[string]bool)
	for i, k := range keys {
		switch {
		case failed[k]:
			verdicts[i] = Hold
			if errs[i] == nil {
				overtaken++
			}
		case errs[i] != nil:
			verdicts[i] = Fail
			failed[k] = true
		default:
			verdicts[i] = Publish
		}
	}
	return verdicts, overtaken
}

// Park says whether a row that has now failed attempts times is parked.
// Only refusals park a row: a transient failure (broker down, timeout) says
// nothing about the row, so it keeps backing off at the cap and goes as
// soon as the cluster is back. maxAttempts <= 0 never parks.
func Park(attempts, maxAttempts int, refused bool) bool {
	return refused && maxAttempts > 0 && attempts >= maxAttempts
}

// Refused reports whether err means the cluster refuses this record itself
// (too large, invalid, not authorised, topic policy), as opposed to a
// failure that may pass by retrying later.
func Refused(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return !ke.Retriable
	}
	return false
}

// ShardOf is the shard of a row whose key hashes to keyHash
// (outbox.KeyHash). Every row of a key is in the same shard.
func ShardOf(keyHash int32, shards int) int {
	return int(keyHash) % shards
}

// FairShare is how many shards one of members live relays should own: the
// ceiling, so the shards are always all covered.
func FairShare(shards, members int) int {
	if members < 1 {
		members = 1
	}
	return (shards + members - 1) / members
}
