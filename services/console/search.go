package console

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SearchKind says what a timeline search names.
type SearchKind string

// What a search can name.
const (
	// SearchUUID is an order id or an event id (both are UUIDs).
	SearchUUID SearchKind = "uuid"
	// SearchPaymentID is payment-svc's payments.id.
	SearchPaymentID SearchKind = "payment"
	// SearchProviderPayment is the provider's PaymentIntent id (pi_…).
	SearchProviderPayment SearchKind = "provider payment"
	// SearchProviderEvent is the provider's webhook event id (evt_…).
	SearchProviderEvent SearchKind = "provider event"
)

// Search is a parsed timeline query.
type Search struct {
	Kind  SearchKind
	Value string
	ID    int64 // SearchPaymentID
}

var (
	uuidRe     = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	providerRe = regexp.MustCompile(`^(pi|evt)_[A-Za-z0-9]{1,64}$`)
)

// ParseSearch reads what the operator typed: an order id or event id
// (UUID), a payment id (a positive integer), a provider payment id (pi_…)
// or a provider event id (evt_…).
func ParseSearch(q string) (Search, error) {
	q = strings.TrimSpace(q)
	switch {
	case q == "":
		return Search{}, fmt.Errorf("search: type an order id, event id, payment id or provider id")
	case uuidRe.MatchString(q):
		return Search{Kind: SearchUUID, Value: strings.ToLower(q)}, nil
	case providerRe.MatchString(q):
		if strings.HasPrefix(q, "evt_") {
			return Search{Kind: SearchProviderEvent, Value: q}, nil
		}
		return Search{Kind: SearchProviderPayment, Value: q}, nil
	}
	if n, err := strconv.ParseInt(q, 10, 64); err == nil {
		if n <= 0 {
			return Search{}, fmt.Errorf("search: payment id %d must be positive", n)
		}
		return Search{Kind: SearchPaymentID, Value: q, ID: n}, nil
	}
	shown := q
	if len(shown) > 80 {
		shown = shown[:80] + "…"
	}
	return Search{}, fmt.Errorf("search: %q is not an order or event id (UUID), a payment id (number) or a provider id (pi_…, evt_…)", shown)
}

// CausalEvent is what CausalOrder needs of an event.
type CausalEvent struct {
	ID       string
	Causes   string // causation id; "" for the first event of a saga
	Appended time.Time
}

// CausalOrder returns the indexes of events so that every event comes after
// the event that caused it, and otherwise in append order. Clocks of
// different databases may disagree by a little; causation does not.
// An event whose cause is not among events counts as a root.
func CausalOrder(events []CausalEvent) []int {
	idx := make(map[string]int, len(events))
	for i, e := range events {
		idx[e.ID] = i
	}
	children := make(map[int][]int, len(events))
	var roots []int
	for i, e := range events {
		if p, ok := idx[e.Causes]; ok && e.Causes != "" && p != i {
			children[p] = append(children[p], i)
		} else {
			roots = append(roots, i)
		}
	}
	byTime := func(s []int) {
		sort.SliceStable(s, func(a, b int) bool {
			ea, eb := events[s[a]], events[s[b]]
			if !ea.Appended.Equal(eb.Appended) {
				return ea.Appended.Before(eb.Appended)
			}
			return ea.ID < eb.ID
		})
	}
	// Ready events (cause emitted) are taken earliest first, so siblings
	// and unrelated branches interleave by time.
	ready := append([]int(nil), roots...)
	out := make([]int, 0, len(events))
	done := make([]bool, len(events))
	for len(ready) > 0 {
		byTime(ready)
		i := ready[0]
		ready = ready[1:]
		if done[i] {
			continue
		}
		done[i] = true
		out = append(out, i)
		ready = append(ready, children[i]...)
	}
	// A cycle of causation ids (corrupt data) leaves events unvisited:
	// show them at the end rather than hide them.
	for i := range events {
		if !done[i] {
			out = append(out, i)
		}
	}
	return out
}
