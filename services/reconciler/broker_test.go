package reconciler

import (
	"testing"
	"time"

	"github.com/concordhq/concord/services/funding"
)

// brokerSpellings are every status each broker enum documents, in the
// broker's own casing, by what they mean, plus values no map knows.
var brokerSpellings = map[funding.Domain]map[string]funding.Status{
	funding.Journal: {"queued": funding.Pending, "pending": funding.Pending, "sent_to_clearing": funding.Pending,
		"executed": funding.Completed, "activity_created": funding.Completed,
		"rejected": funding.Cancelled, "refused": funding.Cancelled, "canceled": funding.Cancelled, "deleted": funding.Cancelled,
		"correct": funding.Reversed, "reversed_by_ops": "?", "": "?"},
	funding.Transfer: {"QUEUED": funding.Pending, "APPROVAL_PENDING": funding.Pending, "PENDING": funding.Pending,
		"SENT_TO_CLEARING": funding.Pending, "APPROVED": funding.Pending, "COMPLETE": funding.Completed, "SETTLED": funding.Completed,
		"REJECTED": funding.Cancelled, "CANCELED": funding.Cancelled, "EXPIRED": funding.Cancelled, "RETURNED": funding.Reversed,
		"FAILED": "?", "": "?"},
	funding.WalletTransfer: {"PENDING": funding.Pending, "EXECUTED": funding.Pending, "COMPLETE": funding.Completed,
		"REJECTED": funding.Cancelled, "FAILED": funding.Cancelled, "CANCELED": funding.Cancelled, "RETURNED": "?"},
}

// TestClassifyMovementEveryPair pins the decision for every local status
// against every status each broker enum documents (and unknown values on
// both sides). A pair missing from the table fails the test.
func TestClassifyMovementEveryPair(t *testing.T) {
	ok := Decision{Verdict: InSync}
	flight := Decision{Verdict: InFlight}
	review := func(k Kind) Decision { return Decision{Verdict: NeedsReview, Kind: k} }
	repair := func(k Kind) Decision {
		return Decision{Verdict: Repairable, Kind: k, Command: CommandApplyBrokerStatus}
	}
	const (
		none                = funding.Status("")
		pending, completed  = funding.Pending, funding.Completed
		cancelled, reversed = funding.Cancelled, funding.Reversed
		unknownLocal        = funding.Status("DISPUTED")
		unknownBroker       = funding.Status("?")
	)
	// By local status and what the broker's status means.
	want := map[[2]funding.Status]Decision{
		{none, pending}:         repair(KindMissedAcceptance),
		{none, completed}:       repair(KindMissedCompletion),
		{none, cancelled}:       repair(KindMissedCancellation),
		{none, reversed}:        repair(KindMissedCompletionAndReversal),
		{pending, pending}:      flight,
		{pending, completed}:    repair(KindMissedCompletion),
		{pending, cancelled}:    repair(KindMissedCancellation),
		{pending, reversed}:     repair(KindMissedCompletionAndReversal),
		{completed, pending}:    review(KindCompletedLocallyNotAtBroker),
		{completed, completed}:  ok,
		{completed, cancelled}:  repair(KindMissedReversal), // an executed journal cancelled: its entry is taken back
		{completed, reversed}:   repair(KindMissedReversal), // RETURNED after COMPLETE, a corrected journal
		{cancelled, pending}:    review(KindFinalLocallyNotAtBroker),
		{cancelled, completed}:  review(KindFinalLocallyNotAtBroker),
		{cancelled, cancelled}:  ok,
		{cancelled, reversed}:   review(Unexpected("CANCELLED", "REVERSED")),
		{reversed, pending}:     review(KindFinalLocallyNotAtBroker),
		{reversed, completed}:   review(KindFinalLocallyNotAtBroker),
		{reversed, cancelled}:   review(Unexpected("REVERSED", "CANCELLED")),
		{reversed, reversed}:    ok,
		{unknownLocal, pending}: review(KindUnknownLocalStatus),
	}
	for _, local := range []funding.Status{none, pending, completed, cancelled, reversed, unknownLocal} {
		for d, spellings := range brokerSpellings {
			for raw, means := range spellings {
				var w Decision
				switch {
				case local == unknownLocal:
					w = review(KindUnknownLocalStatus)
				case means == unknownBroker:
					w = review(KindUnknownExternalStatus)
				default:
					var found bool
					if w, found = want[[2]funding.Status{local, means}]; !found {
						t.Fatalf("no expectation for local %q, broker %s %q (%s)", local, d, raw, means)
					}
				}
				if got := ClassifyMovement(d, local, raw); got != w {
					t.Errorf("ClassifyMovement(%s, %q, %q) = %+v, want %+v", d, local, raw, got, w)
				}
			}
		}
	}
}

// TestExecutedIsNotFinal: a completed (or cancelled, or reversed) movement
// stays under reconciliation for the executed window after its last
// change; a pending one always is. Seed 002's anti-pattern "executed
// treated as final" is this function answering true at once.
func TestExecutedIsNotFinal(t *testing.T) {
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	const window = 72 * time.Hour
	cases := []struct {
		status  funding.Status
		age     time.Duration
		settled bool
	}{
		{funding.Completed, time.Minute, false},
		{funding.Completed, window - time.Second, false},
		{funding.Completed, window, true},
		{funding.Cancelled, time.Hour, false},
		{funding.Reversed, window + time.Hour, true},
		{funding.Pending, 30 * 24 * time.Hour, false},
		{"", 30 * 24 * time.Hour, false},
	}
	for _, c := range cases {
		if got := Settled(c.status, now.Add(-c.age), now, window); got != c.settled {
			t.Errorf("Settled(%q, changed %s ago) = %v, want %v", c.status, c.age, got, c.settled)
		}
	}
}

func TestDecideMovement(t *testing.T) {
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	old := now.Add(-time.Hour)
	m := Movement{Domain: funding.Transfer, BrokerID: "t-1", Status: funding.Completed, UpdatedAt: old}
	cases := []struct {
		name string
		m    Movement
		obs  Observation
		want Decision
	}{
		{"returned after complete", m, Observation{Outcome: Observed, Status: "RETURNED"},
			Decision{Verdict: Repairable, Kind: KindMissedReversal, Command: CommandApplyBrokerStatus, Verified: true}},
		{"in grace", Movement{Domain: funding.Transfer, BrokerID: "t-1", Status: funding.Pending, UpdatedAt: now.Add(-time.Second)},
			Observation{Outcome: Observed, Status: "COMPLETE"}, Decision{Verdict: InFlight}},
		{"no broker id", Movement{Domain: funding.Journal, Status: "", UpdatedAt: old}, Observation{},
			Decision{Verdict: NeedsReview, Kind: KindMissingBrokerReference, Verified: true}},
		{"not found", m, Observation{Outcome: NotFound}, Decision{Verdict: NeedsReview, Kind: KindMissingExternally, Verified: true}},
		{"unavailable", m, Observation{Outcome: Unavailable}, Decision{Verdict: Unverifiable}},
		{"unknown status", m, Observation{Outcome: Observed, Status: "CLAWED_BACK"},
			Decision{Verdict: NeedsReview, Kind: KindUnknownExternalStatus, Verified: true}},
	}
	for _, c := range cases {
		if got := DecideMovement(c.m, c.obs, now, time.Minute); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestDecideUnknown(t *testing.T) {
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	r := BrokerRecord{Domain: funding.Journal, BrokerID: "j-2", AccountID: "a", Status: "executed", Direction: "credit",
		Amount: 2499, Currency: "USD", CreatedAt: now.Add(-time.Hour)}
	repair := Decision{Verdict: Repairable, Kind: KindMissingLocally, Command: CommandApplyBrokerStatus, Verified: true}
	if got := DecideUnknown(r, now, time.Minute); got != repair {
		t.Errorf("a described record: %+v, want %+v", got, repair)
	}
	fresh := r
	fresh.CreatedAt = now.Add(-time.Second)
	if got := DecideUnknown(fresh, now, time.Minute); got.Verdict != InFlight {
		t.Errorf("a record created within grace: %+v, want in flight", got)
	}
	bad := r
	bad.Amount = 0
	if got := DecideUnknown(bad, now, time.Minute); got.Kind != KindUndescribedAtBroker {
		t.Errorf("a record without an amount: %+v, want %s", got, KindUndescribedAtBroker)
	}
	odd := r
	odd.Status = "clawed_back"
	if got := DecideUnknown(odd, now, time.Minute); got.Kind != KindUnknownExternalStatus {
		t.Errorf("an unknown status: %+v, want %s", got, KindUnknownExternalStatus)
	}
}

func TestMovementLag(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	for name, tc := range map[string]struct {
		oldest, cycleStart *time.Time
		want               time.Duration
	}{
		"no movements":                       {nil, at(time.Hour), 0},
		"no cycle completed yet":             {at(3 * time.Hour), nil, 3 * time.Hour},
		"the last cycle started after":       {at(3 * time.Hour), at(20 * time.Minute), 20 * time.Minute},
		"every movement came after it began": {at(5 * time.Minute), at(20 * time.Minute), 5 * time.Minute},
		"a clock ahead of now":               {at(-time.Minute), nil, 0},
	} {
		if got := MovementLag(now, tc.oldest, tc.cycleStart); got != tc.want {
			t.Errorf("%s: lag %v, want %v", name, got, tc.want)
		}
	}
}
