package audit

import (
	"fmt"
	"sort"

	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding"
)

// RailSnapshot is what the broker rail's checks read: funding-svc's mirror
// (movements, entries, balances, the account.* events of its outbox, the
// review queue) and the broker's own records and cash for the same
// accounts, taken once the rail is quiet (every record settled as far as
// the broker will take it, every outbox row published).
type RailSnapshot struct {
	Movements []RailMovement
	Entries   []RailEntry
	// Balances is funding-svc's projected balance per account (cents).
	Balances map[string]int64
	// Events are the account.* events funding-svc committed.
	Events []AccountEvent
	// Projection is each account's balance as funding-svc's consumer of
	// account-events built it (account_balance_projection).
	Projection map[string]Projected
	// Reviews are the news funding-svc sent to review, one line each.
	Reviews []string
	// Broker holds every journal, transfer and wallet transfer the broker
	// has of the accounts; Cash their cash at the broker (cents).
	Broker []BrokerRecord
	Cash   map[string]int64
	// Streams are the status streams' cursors around a kill -9 of
	// funding-svc; empty when it was not killed.
	Streams []StreamWindow
}

// RailMovement is one row of funding_movements.
type RailMovement struct {
	ID           int64
	Domain       funding.Domain
	BrokerID     string // "" while the broker's answer is unknown
	IntentKey    string
	AccountID    string
	Direction    string // credit | debit
	Amount       int64
	Status       funding.Status
	BrokerStatus string
}

// RailEntry is one row of funding_entries: what a movement did to its
// account's balance.
type RailEntry struct {
	MovementID int64
	Kind       string // apply | revert
	AccountID  string
	Amount     int64 // signed
}

// AccountEvent is one account.* event of funding-svc's outbox.
type AccountEvent struct {
	EventID    string
	Type       contract.Type // one of the four account.* types
	AccountID  string
	MovementID string // the broker's id of the movement
	Amount     int64
}

// Projected is one account's row of the consumer-built projection.
type Projected struct {
	Balance int64 // cents
	Events  int64 // account.* events applied
}

// ProjectionCaughtUp says whether the projection has applied, for every
// account, as many events as funding-svc committed for it: what to wait for
// before BalancesMatchBroker, as the projection follows the outbox through
// the relay and Kafka.
func (s RailSnapshot) ProjectionCaughtUp() bool {
	committed := map[string]int64{}
	for _, e := range s.Events {
		committed[e.AccountID]++
	}
	for a, n := range committed {
		if s.Projection[a].Events != n {
			return false
		}
	}
	return true
}

// BrokerRecord is one money movement as the broker shows it, from the
// customer account's side.
type BrokerRecord struct {
	Domain    funding.Domain
	ID        string
	AccountID string
	Direction string // credit | debit
	Amount    int64
	Status    string // the broker's spelling
}

// StreamWindow is one status stream around a kill -9 of funding-svc: the
// cursor the killed process left in its database, the cursor once the rail
// was quiet again, the ids of every event the broker sent on the stream
// between the two (a bounded replay), and the event ids funding-svc took
// in.
type StreamWindow struct {
	Stream        string
	AtKill, After string
	Broker        []string
	Seen          map[string]bool
}

// Rail runs the broker rail's checks.
func Rail(s RailSnapshot) []Result {
	rs := []Result{RailConverged(s), BalancesMatchBroker(s), NoMoneyMovedTwice(s), ReversalsReflected(s), NothingSentToReview(s)}
	if len(s.Streams) > 0 {
		rs = append(rs, CursorsSurvivedKill(s))
	}
	return rs
}

type brokerKey struct {
	domain funding.Domain
	id     string
}

// RailConverged checks that the mirror is the broker's state: every
// broker record is mirrored once with its account, direction and amount,
// in the status the domain's map gives the broker's status, and every
// mirrored record is one the broker holds.
func RailConverged(s RailSnapshot) Result {
	r := Result{Check: "every local record converged to the broker's state"}
	local := map[brokerKey]RailMovement{}
	for _, m := range s.Movements {
		if m.BrokerID == "" {
			r.Violations = append(r.Violations, Violation{"intent " + m.IntentKey, "the broker's answer never came"})
			continue
		}
		local[brokerKey{m.Domain, m.BrokerID}] = m
	}
	atBroker := map[brokerKey]bool{}
	for _, b := range s.Broker {
		k := brokerKey{b.Domain, b.ID}
		atBroker[k] = true
		subject := fmt.Sprintf("%s %s", b.Domain, b.ID)
		want, ok := funding.Map(b.Domain, b.Status)
		if !ok {
			r.Violations = append(r.Violations, Violation{subject, fmt.Sprintf("broker status %q is in no map", b.Status)})
			continue
		}
		m, ok := local[k]
		switch {
		case !ok:
			r.Violations = append(r.Violations, Violation{subject, fmt.Sprintf("%s at the broker, not mirrored", b.Status)})
		case m.Status != want:
			r.Violations = append(r.Violations, Violation{subject, fmt.Sprintf("local %s, broker %s (%s)", m.Status, b.Status, want)})
		case m.AccountID != b.AccountID || m.Direction != b.Direction || m.Amount != b.Amount:
			r.Violations = append(r.Violations, Violation{subject, fmt.Sprintf("local %s %s %d, broker %s %s %d",
				m.AccountID, m.Direction, m.Amount, b.AccountID, b.Direction, b.Amount)})
		}
	}
	for k, m := range local {
		if !atBroker[k] {
			r.Violations = append(r.Violations, Violation{fmt.Sprintf("%s %s", k.domain, k.id), fmt.Sprintf("local %s, unknown to the broker", m.Status)})
		}
	}
	sortViolations(r.Violations)
	r.Summary = fmt.Sprintf("%d broker records, %d local", len(s.Broker), len(s.Movements))
	return r
}

// BalancesMatchBroker checks that each account's balance is the broker's
// cash four ways: funding-svc's balance, the sum of its entries, the sum of
// its committed account.* events, and the projection its consumer of
// account-events built from them, which must also have applied each event
// exactly once.
func BalancesMatchBroker(s RailSnapshot) Result {
	r := Result{Check: "each account's projected balance equals the broker's cash"}
	entries, events, counts := map[string]int64{}, map[string]int64{}, map[string]int64{}
	accounts := map[string]bool{}
	for a := range s.Cash {
		accounts[a] = true
	}
	for a := range s.Balances {
		accounts[a] = true
	}
	for a := range s.Projection {
		accounts[a] = true
	}
	for _, e := range s.Entries {
		entries[e.AccountID] += e.Amount
		accounts[e.AccountID] = true
	}
	for _, e := range s.Events {
		events[e.AccountID] += signed(e)
		counts[e.AccountID]++
		accounts[e.AccountID] = true
	}
	for _, a := range sortedKeys(accounts) {
		cash, ok := s.Cash[a]
		if !ok {
			r.Violations = append(r.Violations, Violation{"account " + a, "unknown to the broker"})
			continue
		}
		b, e, ev, p := s.Balances[a], entries[a], events[a], s.Projection[a]
		if b != cash || e != cash || ev != cash || p.Balance != cash || p.Events != counts[a] {
			r.Violations = append(r.Violations, Violation{"account " + a,
				fmt.Sprintf("broker cash %d, balance %d, entries %d, events %d, projection %d (%d of %d events applied)",
					cash, b, e, ev, p.Balance, p.Events, counts[a])})
		}
	}
	r.Summary = fmt.Sprintf("%d accounts", len(accounts))
	return r
}

// signed is what an account.* event does to the balance.
func signed(e AccountEvent) int64 {
	d, _ := funding.EventDelta(e.Type, e.Amount)
	return d
}

// NoMoneyMovedTwice checks that each broker record is mirrored once, that
// a movement's entries are the ones its status allows (one apply once it
// completed, and one revert once it was reversed, never more), and that
// each entry announced itself with exactly one account.* event.
func NoMoneyMovedTwice(s RailSnapshot) Result {
	r := Result{Check: "no money moved twice"}
	mirrored := map[brokerKey]int{}
	byID := map[int64]RailMovement{}
	for _, m := range s.Movements {
		byID[m.ID] = m
		if m.BrokerID != "" {
			mirrored[brokerKey{m.Domain, m.BrokerID}]++
		}
	}
	for k, n := range mirrored {
		if n > 1 {
			r.Violations = append(r.Violations, Violation{fmt.Sprintf("%s %s", k.domain, k.id), fmt.Sprintf("mirrored %d times", n)})
		}
	}
	type entryKey struct {
		movement int64
		kind     string
	}
	entries := map[entryKey]int{}
	for _, e := range s.Entries {
		entries[entryKey{e.MovementID, e.Kind}]++
	}
	// The events each movement's entries call for, by the broker's id.
	type eventKey struct {
		typ      contract.Type
		movement string
	}
	want := map[eventKey]int{}
	for _, m := range s.Movements {
		subject := fmt.Sprintf("%s %s", m.Domain, orKey(m))
		applies, reverts := entries[entryKey{m.ID, "apply"}], entries[entryKey{m.ID, "revert"}]
		wantApply, wantRevert := entriesFor(m.Status, applies > 0)
		if applies != wantApply || reverts != wantRevert {
			r.Violations = append(r.Violations, Violation{subject, fmt.Sprintf("%s with %d apply and %d revert entries", m.Status, applies, reverts)})
		}
		apply, revert := eventTypes(m.Direction)
		want[eventKey{apply, m.BrokerID}] += applies
		want[eventKey{revert, m.BrokerID}] += reverts
	}
	got := map[eventKey]int{}
	for _, e := range s.Events {
		got[eventKey{e.Type, e.MovementID}]++
	}
	for k := range union(want, got) {
		if want[k] != got[k] {
			r.Violations = append(r.Violations, Violation{"movement " + k.movement, fmt.Sprintf("%s recorded %d times, its entries call for %d", k.typ, got[k], want[k])})
		}
	}
	sortViolations(r.Violations)
	r.Summary = fmt.Sprintf("%d movements, %d entries, %d events", len(s.Movements), len(s.Entries), len(s.Events))
	return r
}

// entriesFor is how many apply and revert entries a movement in status st
// holds: a cancelled one either never moved money or moved it and had it
// taken back (applied says which).
func entriesFor(st funding.Status, applied bool) (apply, revert int) {
	switch st {
	case funding.Completed:
		return 1, 0
	case funding.Reversed:
		return 1, 1
	case funding.Cancelled:
		if applied {
			return 1, 1
		}
	}
	return 0, 0
}

// eventTypes are the events of a movement's apply and revert entries.
func eventTypes(direction string) (apply, revert contract.Type) {
	if direction == "debit" {
		return contract.TypeAccountDebited, contract.TypeAccountDebitReversed
	}
	return contract.TypeAccountCredited, contract.TypeAccountCreditReversed
}

// ReversalsReflected checks that every correction and return at the broker
// (a journal in correct, a transfer RETURNED) took its money back locally
// with a reversing entry and a reversing event, never by editing the
// first.
func ReversalsReflected(s RailSnapshot) Result {
	r := Result{Check: "every correction and return reflected by a reversing event"}
	local := map[brokerKey]RailMovement{}
	for _, m := range s.Movements {
		local[brokerKey{m.Domain, m.BrokerID}] = m
	}
	reverted := map[int64]bool{}
	for _, e := range s.Entries {
		if e.Kind == "revert" {
			reverted[e.MovementID] = true
		}
	}
	reversing := map[string]bool{}
	for _, e := range s.Events {
		if e.Type == contract.TypeAccountCreditReversed || e.Type == contract.TypeAccountDebitReversed {
			reversing[e.MovementID] = true
		}
	}
	var corrections, returns int
	for _, b := range s.Broker {
		if st, _ := funding.Map(b.Domain, b.Status); st != funding.Reversed {
			continue
		}
		if b.Domain == funding.Journal {
			corrections++
		} else {
			returns++
		}
		subject := fmt.Sprintf("%s %s (%s)", b.Domain, b.ID, b.Status)
		m, ok := local[brokerKey{b.Domain, b.ID}]
		switch {
		case !ok:
			r.Violations = append(r.Violations, Violation{subject, "not mirrored"})
		case !reverted[m.ID]:
			r.Violations = append(r.Violations, Violation{subject, fmt.Sprintf("local %s without a revert entry", m.Status)})
		case !reversing[b.ID]:
			r.Violations = append(r.Violations, Violation{subject, "no reversing event"})
		}
	}
	r.Summary = fmt.Sprintf("%d corrected journals, %d returned transfers", corrections, returns)
	return r
}

// NothingSentToReview checks that funding-svc sent no news to review. The
// demo's faults never report a status no map knows or a record nobody can
// place, so a review entry is a bug.
func NothingSentToReview(s RailSnapshot) Result {
	r := Result{Check: "no broker news sent to review", Summary: fmt.Sprintf("%d reviews", len(s.Reviews))}
	for _, v := range s.Reviews {
		r.Violations = append(r.Violations, Violation{"review", v})
	}
	return r
}

// CursorsSurvivedKill checks that funding-svc, killed with SIGKILL and
// restarted, read each stream on from the cursor it had persisted: the
// cursor did not go back, and every event the broker sent after it was
// taken in (an event taken twice would have moved money twice, which
// NoMoneyMovedTwice sees).
func CursorsSurvivedKill(s RailSnapshot) Result {
	r := Result{Check: "the SSE cursors survived a kill -9 of funding-svc"}
	var after int
	for _, w := range s.Streams {
		switch {
		case w.AtKill == "":
			r.Violations = append(r.Violations, Violation{"stream " + w.Stream, "no cursor persisted at the kill"})
			continue
		case w.After < w.AtKill:
			r.Violations = append(r.Violations, Violation{"stream " + w.Stream, fmt.Sprintf("cursor went back from %s to %s", w.AtKill, w.After)})
		}
		var missed []string
		for _, id := range w.Broker {
			if !w.Seen[id] {
				missed = append(missed, id)
			}
		}
		after += len(w.Broker)
		if len(missed) > 0 {
			r.Violations = append(r.Violations, Violation{"stream " + w.Stream,
				fmt.Sprintf("%d of %d events after the cursor never taken in, e.g. %s", len(missed), len(w.Broker), missed[0])})
		}
	}
	r.Summary = fmt.Sprintf("%d streams, %d events sent after the kill's cursors", len(s.Streams), after)
	return r
}

func orKey(m RailMovement) string {
	if m.BrokerID != "" {
		return m.BrokerID
	}
	return "intent " + m.IntentKey
}

func union[K comparable](a, b map[K]int) map[K]bool {
	out := map[K]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// sortViolations orders violations found by walking maps, so a report
// reads the same every run.
func sortViolations(vs []Violation) {
	sort.Slice(vs, func(i, j int) bool { return vs[i].String() < vs[j].String() })
}
