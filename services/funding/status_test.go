package funding_test

import (
	"testing"

	"github.com/concordhq/concord/services/funding"
)

func TestMapKnowsTheUnionOfEveryDocumentedSpellingAndNothingElse(t *testing.T) {
	for _, tc := range []struct {
		domain funding.Domain
		in     string
		want   funding.Status
		ok     bool
	}{
		// Journals: lowercase in the API; any case is read.
		{funding.Journal, "queued", funding.Pending, true},
		{funding.Journal, "pending", funding.Pending, true},
		{funding.Journal, "sent_to_clearing", funding.Pending, true},
		{funding.Journal, "executed", funding.Completed, true},
		{funding.Journal, "EXECUTED", funding.Completed, true},
		{funding.Journal, " Executed ", funding.Completed, true},
		{funding.Journal, "activity_created", funding.Completed, true},
		{funding.Journal, "rejected", funding.Cancelled, true},
		{funding.Journal, "refused", funding.Cancelled, true},
		{funding.Journal, "canceled", funding.Cancelled, true},
		{funding.Journal, "deleted", funding.Cancelled, true},
		{funding.Journal, "correct", funding.Reversed, true},
		{funding.Journal, "complete", "", false}, // a transfer's word
		{funding.Journal, "returned", "", false},
		{funding.Journal, "failed", "", false},
		{funding.Journal, "", "", false},
		// Transfers: REST ∪ funding stream ∪ client library.
		{funding.Transfer, "QUEUED", funding.Pending, true},
		{funding.Transfer, "APPROVAL_PENDING", funding.Pending, true},
		{funding.Transfer, "PENDING", funding.Pending, true},
		{funding.Transfer, "SENT_TO_CLEARING", funding.Pending, true},
		{funding.Transfer, "sent_to_clearing", funding.Pending, true}, // the SSE guide's samples are lowercase
		{funding.Transfer, "APPROVED", funding.Pending, true},
		{funding.Transfer, "COMPLETE", funding.Completed, true},
		{funding.Transfer, "SETTLED", funding.Completed, true},
		{funding.Transfer, "REJECTED", funding.Cancelled, true},
		{funding.Transfer, "CANCELED", funding.Cancelled, true},
		{funding.Transfer, "EXPIRED", funding.Cancelled, true},
		{funding.Transfer, "RETURNED", funding.Reversed, true},
		{funding.Transfer, "FAILED", "", false}, // transfers have no failed
		{funding.Transfer, "executed", "", false},
		{funding.Transfer, "COMPLETED", "", false},
		// Funding-wallet transfers: spec ∪ guide.
		{funding.WalletTransfer, "PENDING", funding.Pending, true},
		{funding.WalletTransfer, "EXECUTED", funding.Pending, true},
		{funding.WalletTransfer, "Complete", funding.Completed, true},
		{funding.WalletTransfer, "REJECTED", funding.Cancelled, true},
		{funding.WalletTransfer, "FAILED", funding.Cancelled, true},
		{funding.WalletTransfer, "CANCELED", funding.Cancelled, true},
		{funding.WalletTransfer, "RETURNED", "", false},
		// An unknown domain maps nothing.
		{"order", "filled", "", false},
	} {
		got, ok := funding.Map(tc.domain, tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Map(%s, %q) = %q, %v; want %q, %v", tc.domain, tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFinalStatusesAreThoseNoNewsCanChange(t *testing.T) {
	for st, want := range map[funding.Status]bool{
		funding.Pending: false, funding.Completed: false, // completed can still be reversed
		funding.Cancelled: true, funding.Reversed: true,
	} {
		if got := funding.Final(st); got != want {
			t.Errorf("Final(%s) = %v, want %v", st, got, want)
		}
	}
}

// Every pair of stored status and news: duplicates and news from the
// past change nothing, money moves once, and what moved and was taken
// back nets to zero whatever order the news came in.
func TestNextIsStatusGuardedAndMovesMoneyOnce(t *testing.T) {
	const (
		P, C, X, R = funding.Pending, funding.Completed, funding.Cancelled, funding.Reversed
		none       = funding.NoEffect
	)
	for _, tc := range []struct {
		current, news funding.Status
		next          funding.Status
		changed       bool
		effect        funding.Effect
	}{
		{"", P, P, true, none},
		{"", C, C, true, funding.Apply},
		{"", X, X, true, none},
		{"", R, R, true, funding.ApplyAndRevert},
		{P, P, P, false, none},
		{P, C, C, true, funding.Apply},
		{P, X, X, true, none},
		{P, R, R, true, funding.ApplyAndRevert},
		{C, P, C, false, none}, // late pending after completed
		{C, C, C, false, none}, // duplicate
		{C, X, X, true, funding.Revert},
		{C, R, R, true, funding.Revert},
		{X, P, X, false, none},
		{X, C, X, false, none},
		{X, X, X, false, none},
		{X, R, X, false, none},
		{R, P, R, false, none},
		{R, C, R, false, none}, // a late complete after the return
		{R, X, R, false, none},
		{R, R, R, false, none},
		{C, "SOMETHING", C, false, none},
		{P, "SOMETHING", P, false, none},
		{"", "SOMETHING", "", false, none},
		{P, "", P, false, none},
	} {
		next, changed, effect := funding.Next(tc.current, tc.news)
		if next != tc.next || changed != tc.changed || effect != tc.effect {
			t.Errorf("Next(%q, %q) = %q, %v, %v; want %q, %v, %v", tc.current, tc.news, next, changed, effect, tc.next, tc.changed, tc.effect)
		}
	}
}

// Applied in any order, the news of a movement leave the account with
// the broker's net: +1 for a completed one, 0 for one reversed or never
// moved.
func TestAnyOrderOfNewsNetsToTheBrokersOutcome(t *testing.T) {
	net := func(e funding.Effect) int {
		switch e {
		case funding.Apply:
			return 1
		case funding.Revert:
			return -1
		default:
			return 0
		}
	}
	for _, tc := range []struct {
		news []funding.Status
		want int
	}{
		{[]funding.Status{funding.Pending, funding.Completed}, 1},
		{[]funding.Status{funding.Completed, funding.Pending, funding.Completed}, 1},
		{[]funding.Status{funding.Pending, funding.Completed, funding.Reversed}, 0},
		{[]funding.Status{funding.Reversed, funding.Completed, funding.Pending}, 0},
		{[]funding.Status{funding.Completed, funding.Reversed, funding.Completed, funding.Reversed}, 0},
		{[]funding.Status{funding.Pending, funding.Cancelled, funding.Completed}, 0},
		{[]funding.Status{funding.Completed, funding.Cancelled}, 0},
	} {
		var st funding.Status
		total := 0
		for _, n := range tc.news {
			var e funding.Effect
			st, _, e = funding.Next(st, n)
			total += net(e)
		}
		if total != tc.want {
			t.Errorf("news %v: net %d, want %d", tc.news, total, tc.want)
		}
	}
}
