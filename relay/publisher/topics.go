package publisher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// recordOverhead over-estimates the bytes a record batch of one record adds
// to the record's key, value and headers (61-byte batch header plus the
// record's varints and attributes), so the size check errs on the safe side.
const recordOverhead = 128

// topicLimits caches each topic's max.message.bytes. The relay checks every
// record against it before producing: franz-go fails a record too large for
// a batch on its own, alone, and would still deliver the later records of
// its partition, putting a later row of the key in Kafka before the refused
// one. The check fails the row first, so Sendable's rules hold the key back.
type topicLimits struct{ m sync.Map }

func (l *topicLimits) get(topic string) (int32, bool) {
	v, ok := l.m.Load(topic)
	if !ok {
		return 0, false
	}
	return v.(int32), true
}

// load fetches the limits of the topics not cached yet. A topic that cannot
// be described (missing, no permission) is left out; the producer's cap
// applies to it and it is tried again next batch.
func (l *topicLimits) load(ctx context.Context, adm *kadm.Client, topics []string) {
	var missing []string
	for _, t := range topics {
		if _, ok := l.m.Load(t); !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, missing...)
	if err != nil {
		return
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			continue
		}
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil {
				if n, err := strconv.ParseInt(*c.Value, 10, 32); err == nil {
					l.m.Store(rc.Name, int32(n))
				}
			}
		}
	}
}

// errTooLarge is the error of a record larger than its topic accepts. It
// wraps kerr.MessageTooLarge, the error the broker answers for it.
func errTooLarge(size int, limit int32, topic string) error {
	return fmt.Errorf("%w: record of about %d bytes exceeds max.message.bytes %d of topic %s", kerr.MessageTooLarge, size, limit, topic)
}

// CreateTopics creates the topics that do not exist yet with the given
// partitions and replication factor; existing topics are left as they are.
func CreateTopics(ctx context.Context, adm *kadm.Client, partitions int32, replication int16, topics ...string) error {
	if len(topics) == 0 {
		return nil
	}
	resp, err := adm.CreateTopics(ctx, partitions, replication, nil, topics...)
	if err != nil {
		return fmt.Errorf("create topics %v: %w", topics, err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}
