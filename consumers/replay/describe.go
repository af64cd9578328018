package replay

import (
	"context"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"
)

// OffsetRow is one partition of a group as Apache's --describe --offsets
// shows it. Current and Lag are -1 where the group has no committed offset;
// the member fields are empty for a partition no live member holds.
type OffsetRow struct {
	Topic     string
	Partition int32
	Current   int64
	End       int64
	Lag       int64
	MemberID  string
	Host      string
	ClientID  string
}

// Description is a group's state, members and offsets.
type Description struct {
	Group
	Offsets []OffsetRow
}

// Describe gathers what Apache's --describe prints for each group: the
// partitions the group committed offsets for or its members hold, with
// the log end offset and the lag.
func Describe(ctx context.Context, adm *kadm.Client, names ...string) ([]Description, error) {
	groups, err := DescribeGroups(ctx, adm, names...)
	if err != nil {
		return nil, err
	}
	var out []Description
	for _, name := range names {
		g := groups[name]
		d := Description{Group: g}
		committed, err := adm.FetchOffsets(ctx, name)
		if err == nil {
			err = committed.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("fetch committed offsets of %s: %w", name, err)
		}
		holder := map[TopicPartition]Member{}
		parts := map[TopicPartition]bool{}
		for _, m := range g.Members {
			m.Assignment.Each(func(t string, p int32) {
				holder[TopicPartition{t, p}] = m
				parts[TopicPartition{t, p}] = true
			})
		}
		committed.Each(func(o kadm.OffsetResponse) {
			if o.At >= 0 {
				parts[TopicPartition{o.Topic, o.Partition}] = true
			}
		})
		topics := map[string]bool{}
		for tp := range parts {
			topics[tp.Topic] = true
		}
		var ends kadm.ListedOffsets
		if len(topics) > 0 {
			names := make([]string, 0, len(topics))
			for t := range topics {
				names = append(names, t)
			}
			ends, err = adm.ListEndOffsets(ctx, names...)
			if err != nil {
				return nil, fmt.Errorf("list end offsets: %w", err)
			}
		}
		for tp := range parts {
			r := OffsetRow{Topic: tp.Topic, Partition: tp.Partition, Current: -1, End: -1, Lag: -1}
			if c, ok := committed.Lookup(tp.Topic, tp.Partition); ok && c.At >= 0 {
				r.Current = c.At
			}
			if e, ok := ends.Lookup(tp.Topic, tp.Partition); ok && e.Err == nil {
				r.End = e.Offset
			}
			if r.Current >= 0 && r.End >= 0 {
				r.Lag = r.End - r.Current
			}
			if m, ok := holder[tp]; ok {
				r.MemberID, r.Host, r.ClientID = m.ID, m.Host, m.ClientID
			}
			d.Offsets = append(d.Offsets, r)
		}
		sort.Slice(d.Offsets, func(i, j int) bool {
			a, b := d.Offsets[i], d.Offsets[j]
			return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
		})
		out = append(out, d)
	}
	return out, nil
}

// DeleteOffsets deletes the group's committed offsets of the selected
// partitions ("topic" for all its partitions, "topic:0,2"), as Apache's
// --delete-offsets does. The broker refuses partitions of topics the
// group's live members subscribe to; each partition's outcome is returned.
func DeleteOffsets(ctx context.Context, adm *kadm.Client, group string, topics []string) (map[TopicPartition]error, error) {
	parts, err := selectPartitions(ctx, adm, nil, Target{Topics: topics})
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	for tp := range parts {
		set.Add(tp.topic, tp.partition)
	}
	resp, err := adm.DeleteOffsets(ctx, group, set)
	if err != nil {
		return nil, fmt.Errorf("delete offsets of group %s: %w", group, err)
	}
	out := map[TopicPartition]error{}
	for tp := range parts {
		e, ok := resp.Lookup(tp.topic, tp.partition)
		if !ok {
			e = fmt.Errorf("no answer from the broker")
		}
		out[TopicPartition{tp.topic, tp.partition}] = e
	}
	return out, nil
}
