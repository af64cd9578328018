package replay

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Row is one partition of a reset plan. Current is -1 when the group has no
// committed offset there; End is the log end offset when the plan was made.
type Row struct {
	Topic     string
	Partition int32
	Current   int64
	New       int64
	End       int64
}

// Plan is the new offsets for a group, decided but not yet applied.
type Plan struct {
	Group    string
	Spec     Spec
	Rows     []Row
	Warnings []string // Apache's warnings, e.g. a time after the last record
}

// Target selects the partitions to reset: every partition the group has
// committed offsets for (All, Apache's --all-topics), or the given topics,
// each "topic" (all its partitions) or "topic:0,2" (those partitions). For
// the FromFile strategy the file's partitions are the selection and All and
// Topics are not used.
type Target struct {
	All    bool
	Topics []string
	File   FileOffsets
}

// Prepare checks that the group is inactive and decides each partition's
// new offset. It changes nothing.
func Prepare(ctx context.Context, adm *kadm.Client, group string, target Target, spec Spec) (Plan, error) {
	plan := Plan{Group: group, Spec: spec}
	described, err := DescribeGroups(ctx, adm, group)
	if err != nil {
		return plan, err
	}
	if err := CheckInactive(described[group]); err != nil {
		return plan, err
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return plan, fmt.Errorf("fetch committed offsets of %s: %w", group, err)
	}
	if err := committed.Error(); err != nil {
		return plan, fmt.Errorf("fetch committed offsets of %s: %w", group, err)
	}

	var parts tpSet
	if spec.Strategy == FromFile {
		parts, err = fileSelection(ctx, adm, group, target.File)
	} else {
		parts, err = selectPartitions(ctx, adm, committed, target)
	}
	if err != nil {
		return plan, err
	}
	if len(parts) == 0 {
		return plan, nil // --all-topics of a group without commits: nothing to reset, as Apache answers
	}
	topics := parts.topics()
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return plan, fmt.Errorf("list start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return plan, fmt.Errorf("list end offsets: %w", err)
	}
	var atTime kadm.ListedOffsets
	if spec.Strategy == ToDatetime || spec.Strategy == ByDuration {
		atTime, err = adm.ListOffsetsAfterMilli(ctx, spec.Time.UnixMilli(), topics...)
		if err == nil {
			err = atTime.Error()
		}
		if err != nil {
			return plan, fmt.Errorf("list offsets by time %s: %w", spec.Time.Format(time.RFC3339Nano), err)
		}
	}
	for _, tp := range parts.sorted() {
		p := Partition{Topic: tp.topic, Partition: tp.partition, Committed: -1, AtTime: -1}
		s, ok1 := starts.Lookup(tp.topic, tp.partition)
		e, ok2 := ends.Lookup(tp.topic, tp.partition)
		if !ok1 || !ok2 {
			return plan, fmt.Errorf("no start or end offset for %s-%d", tp.topic, tp.partition)
		}
		p.Start, p.End = s.Offset, e.Offset
		if c, ok := committed.Lookup(tp.topic, tp.partition); ok && c.At >= 0 {
			p.Committed = c.At
		}
		if spec.Strategy == FromFile {
			p.Requested = target.File[group][TopicPartition{tp.topic, tp.partition}]
		}
		if atTime != nil {
			if a, ok := atTime.Lookup(tp.topic, tp.partition); ok && a.Offset >= 0 {
				p.AtTime = a.Offset
			}
		}
		if atTime != nil && p.AtTime < 0 {
			plan.Warnings = append(plan.Warnings, fmt.Sprintf("Warn: Partition %d from topic %s is empty. Falling back to latest known offset.", p.Partition, p.Topic))
		}
		n, err := NewOffset(spec, p)
		if err != nil {
			return plan, err
		}
		plan.Rows = append(plan.Rows, Row{Topic: p.Topic, Partition: p.Partition, Current: p.Committed, New: n, End: p.End})
	}
	return plan, nil
}

// Execute commits the plan's offsets for the group. The broker refuses the
// commit if members joined since Prepare.
func Execute(ctx context.Context, adm *kadm.Client, plan Plan) error {
	var os kadm.Offsets
	for _, r := range plan.Rows {
		os.Add(kadm.Offset{Topic: r.Topic, Partition: r.Partition, At: r.New, LeaderEpoch: -1})
	}
	resp, err := adm.CommitOffsets(ctx, plan.Group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("commit new offsets of group %s: %w", plan.Group, err)
	}
	return nil
}

type tp struct {
	topic     string
	partition int32
}

type tpSet map[tp]bool

func (s tpSet) topics() []string {
	seen := map[string]bool{}
	var out []string
	for k := range s {
		if !seen[k.topic] {
			seen[k.topic] = true
			out = append(out, k.topic)
		}
	}
	sort.Strings(out)
	return out
}

func (s tpSet) sorted() []tp {
	out := make([]tp, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].topic < out[j].topic || out[i].topic == out[j].topic && out[i].partition < out[j].partition
	})
	return out
}

func selectPartitions(ctx context.Context, adm *kadm.Client, committed kadm.OffsetResponses, target Target) (tpSet, error) {
	set := tpSet{}
	if target.All {
		committed.Each(func(o kadm.OffsetResponse) {
			if o.At >= 0 {
				set[tp{o.Topic, o.Partition}] = true
			}
		})
		return set, nil
	}
	// The selection is the same whatever the order of the arguments: a bare
	// topic selects all its partitions, "topic:0,2" those partitions. As in
	// Apache's tool, a partition selected twice (by "T" and "T:1", or by
	// "T:1,1") is refused; naming a bare topic twice is not.
	whole := map[string]bool{}
	explicit := map[string][]int32{}
	var names []string
	for _, arg := range target.Topics {
		topic, list, hasList := strings.Cut(arg, ":")
		if topic == "" {
			return nil, fmt.Errorf("invalid topic arg %q, expected a topic name and optional partitions (topic:0,1)", arg)
		}
		names = append(names, topic)
		if !hasList {
			whole[topic] = true
			continue
		}
		for _, s := range strings.Split(list, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("invalid partition %q specified in topic arg %q", s, arg)
			}
			explicit[topic] = append(explicit[topic], int32(n))
		}
	}
	if dup := duplicateSelection(whole, explicit); dup != "" {
		return nil, fmt.Errorf("partition %s is selected twice by --topic; name it once (a bare topic selects all its partitions)", dup)
	}
	for topic := range whole {
		explicit[topic] = nil
	}
	return existing(ctx, adm, names, explicit)
}

// fileSelection is the partitions a --from-file plan names for the group.
func fileSelection(ctx context.Context, adm *kadm.Client, group string, file FileOffsets) (tpSet, error) {
	offsets, ok := file[group]
	if !ok {
		return nil, fmt.Errorf("no reset plan for group %s found in the file (it has %s)", group, strings.Join(file.Groups(), ", "))
	}
	explicit := map[string][]int32{}
	var names []string
	for k := range offsets {
		if explicit[k.Topic] == nil {
			names = append(names, k.Topic)
		}
		explicit[k.Topic] = append(explicit[k.Topic], k.Partition)
	}
	return existing(ctx, adm, names, explicit)
}

// existing checks that the topics and partitions exist and returns them; a
// nil partition list stands for every partition of the topic.
func existing(ctx context.Context, adm *kadm.Client, names []string, explicit map[string][]int32) (tpSet, error) {
	set := tpSet{}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("describe topics: %w", err)
	}
	var missing []string
	for topic, ps := range explicit {
		d, ok := details[topic]
		if !ok || d.Err != nil {
			missing = append(missing, topic)
			continue
		}
		if ps == nil {
			for p := range d.Partitions {
				set[tp{topic, p}] = true
			}
			continue
		}
		for _, p := range ps {
			if _, ok := d.Partitions[p]; !ok {
				missing = append(missing, fmt.Sprintf("%s-%d", topic, p))
				continue
			}
			set[tp{topic, p}] = true
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("the partitions %q do not exist", strings.Join(missing, ","))
	}
	return set, nil
}

// duplicateSelection returns the first partition ("topic-p") that the
// explicit lists name twice, or that a list names while its topic is also
// named bare; "" when there is none.
func duplicateSelection(whole map[string]bool, explicit map[string][]int32) string {
	var dups []string
	for topic, ps := range explicit {
		seen := map[int32]bool{}
		for _, p := range ps {
			if seen[p] || whole[topic] {
				dups = append(dups, fmt.Sprintf("%s-%d", topic, p))
			}
			seen[p] = true
		}
	}
	if len(dups) == 0 {
		return ""
	}
	sort.Strings(dups)
	return dups[0]
}
