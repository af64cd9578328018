package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group types of ListGroups and of Apache's --describe --state.
const (
	TypeClassic  = "classic"  // the client-driven JoinGroup/SyncGroup protocol
	TypeConsumer = "consumer" // KIP-848: the broker assigns partitions
)

// Group is what the cluster says of a consumer group, whichever protocol its
// members speak.
type Group struct {
	Name        string
	Type        string // TypeClassic or TypeConsumer; "" for a group the cluster does not know
	State       string // as Apache's tool prints it: Empty, Stable, PreparingRebalance, Reconciling, Dead…
	Assignor    string // the partition assignor (classic: the protocol the members agreed on)
	Coordinator kadm.BrokerDetail
	Members     []Member
}

// Member is one live member of a group and the partitions it holds.
type Member struct {
	ID         string
	InstanceID string // "" when the member has no static group.instance.id
	ClientID   string
	Host       string
	Assignment kadm.TopicsSet
}

// Inactive reports whether offsets may be reset: Apache allows it only in
// the Empty and Dead states, and for a group the cluster does not know.
func (g Group) Inactive() bool {
	switch g.State {
	case "Empty", "Dead", "":
		return true
	}
	return false
}

// DescribeGroups describes the groups with ConsumerGroupDescribe, which
// knows the KIP-848 groups, and the groups it does not know with the classic
// DescribeGroups. Using only the classic call would miss every live
// consumer-protocol group: the broker answers GROUP_ID_NOT_FOUND for them,
// which reads like a group that does not exist. A group neither call knows
// is returned in the Dead state, as Apache's tool reports it.
func DescribeGroups(ctx context.Context, adm *kadm.Client, names ...string) (map[string]Group, error) {
	out := make(map[string]Group, len(names))
	if len(names) == 0 {
		return out, nil
	}
	var classic []string
	described, err := adm.DescribeConsumerGroups(ctx, names...)
	if err != nil {
		// A cluster before Kafka 4.0 has no consumer-protocol groups and
		// cannot answer the call; any other failure must not be taken for
		// "no such group", or a live group would be reset.
		if supported, verr := consumerDescribeSupported(ctx, adm); verr != nil || supported {
			return nil, fmt.Errorf("describe groups %s: %w", strings.Join(names, ","), err)
		}
		classic = names
	} else {
		for _, name := range names {
			d, ok := described[name]
			if !ok || errors.Is(d.Err, kerr.GroupIDNotFound) {
				classic = append(classic, name)
				continue
			}
			if d.Err != nil {
				return nil, fmt.Errorf("describe group %s: %w", name, d.Err)
			}
			g := Group{Name: name, Type: TypeConsumer, State: apacheState(d.State), Assignor: d.AssignorName, Coordinator: d.Coordinator}
			for _, m := range d.Members {
				g.Members = append(g.Members, Member{ID: m.MemberID, InstanceID: deref(m.InstanceID), ClientID: m.ClientID, Host: m.ClientHost, Assignment: m.Assignment})
			}
			out[name] = g
		}
	}
	if len(classic) == 0 {
		return out, nil
	}
	cd, err := adm.DescribeGroups(ctx, classic...)
	if err != nil {
		return nil, fmt.Errorf("describe groups %s: %w", strings.Join(classic, ","), err)
	}
	for _, name := range classic {
		d, ok := cd[name]
		if !ok || errors.Is(d.Err, kerr.GroupIDNotFound) {
			out[name] = Group{Name: name, State: "Dead"}
			continue
		}
		if d.Err != nil {
			return nil, fmt.Errorf("describe group %s: %w", name, d.Err)
		}
		g := Group{Name: name, Type: TypeClassic, State: apacheState(d.State), Assignor: d.Protocol, Coordinator: d.Coordinator}
		if d.State == "Dead" {
			g.Type = ""
		}
		for _, m := range d.Members {
			mem := Member{ID: m.MemberID, InstanceID: deref(m.InstanceID), ClientID: m.ClientID, Host: m.ClientHost, Assignment: kadm.TopicsSet{}}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					mem.Assignment.Add(t.Topic, t.Partitions...)
				}
			}
			g.Members = append(g.Members, mem)
		}
		out[name] = g
	}
	return out, nil
}

// consumerDescribeSupported reports whether any broker answers
// ConsumerGroupDescribe (Kafka 4.0+).
func consumerDescribeSupported(ctx context.Context, adm *kadm.Client) (bool, error) {
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		return false, err
	}
	supported := false
	versions.Each(func(v kadm.BrokerApiVersions) {
		if _, ok := v.KeyMaxVersion(kmsg.ConsumerGroupDescribe.Int16()); ok {
			supported = true
		}
	})
	return supported, nil
}

// apacheState spells a state as Apache's GroupState.toString does: the
// consumer-protocol coordinator answers in lower case ("stable"), the
// classic one in Pascal case.
func apacheState(s string) string {
	for _, known := range []string{"Unknown", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling"} {
		if strings.EqualFold(s, known) {
			return known
		}
	}
	return s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ListGroups returns the names of the cluster's consumer groups (classic
// and consumer protocol; not share or streams groups), sorted.
func ListGroups(ctx context.Context, adm *kadm.Client) ([]kadm.ListedGroup, error) {
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	var out []kadm.ListedGroup
	for _, g := range listed.Sorted() {
		switch g.GroupType {
		case "share", "streams":
			continue
		case "":
			if g.ProtocolType != "consumer" && g.ProtocolType != "" {
				continue
			}
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}

// CheckInactive applies Apache's rule with Apache's sentence: a reset is
// allowed only when the group is Empty or Dead.
func CheckInactive(g Group) error {
	if g.Inactive() {
		return nil
	}
	return fmt.Errorf("%w: Assignments can only be reset if the group '%s' is inactive, but the current state is %s.", ErrGroupActive, g.Name, g.State)
}
