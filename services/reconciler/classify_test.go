package reconciler

import (
	"testing"
	"time"
)

// TestClassifyEveryPair pins the decision for every pair of local and
// provider status, unknown values on both sides included. A pair missing
// from the table fails the test, so a new status cannot slip in unclassified.
func TestClassifyEveryPair(t *testing.T) {
	ok := Decision{Verdict: InSync}
	flight := Decision{Verdict: InFlight}
	review := func(k Kind) Decision { return Decision{Verdict: NeedsReview, Kind: k} }
	repair := func(k Kind, c Command) Decision { return Decision{Verdict: Repairable, Kind: k, Command: c} }
	paidNot := review(KindPaidLocallyNotExternally)
	unknownExt := review(KindUnknownExternalStatus)
	unknownLocal := review(KindUnknownLocalStatus)

	const futureExt = "requires_reauthorization" // a status a later API version might add
	const futureLocal = "disputed"
	externals := []string{ExtRequiresPaymentMethod, ExtRequiresConfirmation, ExtRequiresAction, ExtRequiresCapture,
		ExtProcessing, ExtSucceeded, ExtCanceled, ExtDeclined, ExtRefunded, futureExt, ""}
	locals := []string{LocalPending, LocalPaid, LocalFailed, LocalRefunded, futureLocal, ""}

	want := map[[2]string]Decision{
		// pending: the seed's rows, plus declines and refunds.
		{LocalPending, ExtRequiresPaymentMethod}: ok,
		{LocalPending, ExtRequiresConfirmation}:  flight,
		{LocalPending, ExtRequiresAction}:        flight,
		{LocalPending, ExtRequiresCapture}:       flight,
		{LocalPending, ExtProcessing}:            flight,
		{LocalPending, ExtSucceeded}:             repair(KindMissedSuccess, CommandApplySucceeded),
		{LocalPending, ExtCanceled}:              repair(KindMissedCancel, CommandApplyCanceled),
		{LocalPending, ExtDeclined}:              repair(KindMissedDecline, CommandApplyCanceled),
		{LocalPending, ExtRefunded}:              review(KindPendingRefundedExternally),
		{LocalPending, futureExt}:                unknownExt,
		{LocalPending, ""}:                       unknownExt,
		// paid: anything but succeeded is a review (the seed's ("paid", _)).
		{LocalPaid, ExtRequiresPaymentMethod}: paidNot,
		{LocalPaid, ExtRequiresConfirmation}:  paidNot,
		{LocalPaid, ExtRequiresAction}:        paidNot,
		{LocalPaid, ExtRequiresCapture}:       paidNot,
		{LocalPaid, ExtProcessing}:            paidNot,
		{LocalPaid, ExtSucceeded}:             ok,
		{LocalPaid, ExtCanceled}:              paidNot,
		{LocalPaid, ExtDeclined}:              paidNot,
		{LocalPaid, ExtRefunded}:              review(KindRefundedExternally),
		{LocalPaid, futureExt}:                unknownExt,
		{LocalPaid, ""}:                       unknownExt,
		// failed
		{LocalFailed, ExtRequiresPaymentMethod}: ok,
		{LocalFailed, ExtRequiresConfirmation}:  flight,
		{LocalFailed, ExtRequiresAction}:        flight,
		{LocalFailed, ExtRequiresCapture}:       flight,
		{LocalFailed, ExtProcessing}:            flight,
		{LocalFailed, ExtSucceeded}:             repair(KindSucceededExternallyFailedLocally, CommandApplySucceeded),
		{LocalFailed, ExtCanceled}:              ok,
		{LocalFailed, ExtDeclined}:              ok,
		{LocalFailed, ExtRefunded}:              ok,
		{LocalFailed, futureExt}:                unknownExt,
		{LocalFailed, ""}:                       unknownExt,
		// refunded
		{LocalRefunded, ExtRequiresPaymentMethod}: review(Unexpected(LocalRefunded, ExtRequiresPaymentMethod)),
		{LocalRefunded, ExtRequiresConfirmation}:  review(Unexpected(LocalRefunded, ExtRequiresConfirmation)),
		{LocalRefunded, ExtRequiresAction}:        review(Unexpected(LocalRefunded, ExtRequiresAction)),
		{LocalRefunded, ExtRequiresCapture}:       review(Unexpected(LocalRefunded, ExtRequiresCapture)),
		{LocalRefunded, ExtProcessing}:            review(Unexpected(LocalRefunded, ExtProcessing)),
		{LocalRefunded, ExtSucceeded}:             review(KindRefundedLocallyNotExternally),
		{LocalRefunded, ExtCanceled}:              review(Unexpected(LocalRefunded, ExtCanceled)),
		{LocalRefunded, ExtDeclined}:              review(Unexpected(LocalRefunded, ExtDeclined)),
		{LocalRefunded, ExtRefunded}:              ok,
		{LocalRefunded, futureExt}:                unknownExt,
		{LocalRefunded, ""}:                       unknownExt,
	}
	for _, e := range externals {
		want[[2]string{futureLocal, e}] = unknownLocal
		want[[2]string{"", e}] = unknownLocal
	}

	for _, l := range locals {
		for _, e := range externals {
			w, found := want[[2]string{l, e}]
			if !found {
				t.Errorf("pair (%q, %q) has no expected decision in the table", l, e)
				continue
			}
			if got := Classify(l, e); got != w {
				t.Errorf("Classify(%q, %q) = %+v, want %+v", l, e, got, w)
			}
		}
	}
	if len(want) != len(locals)*len(externals) {
		t.Errorf("table has %d pairs, the product has %d", len(want), len(locals)*len(externals))
	}
}

// TestClassifyCommandsOnlyForRepairable: a repair command without a
// Repairable verdict would change money state behind a reviewer's back.
func TestClassifyCommandsOnlyForRepairable(t *testing.T) {
	for _, l := range []string{LocalPending, LocalPaid, LocalFailed, LocalRefunded, "x"} {
		for e := range knownExternal {
			d := Classify(l, e)
			if (d.Command != "") != (d.Verdict == Repairable) {
				t.Errorf("Classify(%q, %q) = %+v: command and verdict disagree", l, e, d)
			}
			if (d.Kind != "") != (d.Verdict == Repairable || d.Verdict == NeedsReview) {
				t.Errorf("Classify(%q, %q) = %+v: a finding kind belongs to repairable and review verdicts only", l, e, d)
			}
		}
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	grace := 10 * time.Minute
	old := now.Add(-time.Hour)
	row := func(status, ref string, updated time.Time) Row {
		return Row{PaymentID: 7, ProviderID: ref, Status: status, CreatedAt: old, UpdatedAt: updated}
	}
	seen := func(s string) Observation { return Observation{Outcome: Observed, Status: s} }
	cases := []struct {
		name string
		row  Row
		obs  Observation
		want Decision
	}{
		{"changed within grace is in flight, not verified", row(LocalPending, "pi_1", now.Add(-time.Minute)), seen(ExtSucceeded),
			Decision{Verdict: InFlight}},
		{"grace boundary is outside grace", row(LocalPending, "pi_1", now.Add(-grace)), seen(ExtSucceeded),
			Decision{Verdict: Repairable, Kind: KindMissedSuccess, Command: CommandApplySucceeded, Verified: true}},
		{"unavailable is unverifiable, not verified", row(LocalPaid, "pi_1", old), Observation{Outcome: Unavailable},
			Decision{Verdict: Unverifiable}},
		{"not asked is unverifiable", row(LocalPaid, "pi_1", old), Observation{},
			Decision{Verdict: Unverifiable}},
		{"not found is missing_externally", row(LocalPaid, "pi_1", old), Observation{Outcome: NotFound},
			Decision{Verdict: NeedsReview, Kind: KindMissingExternally, Verified: true}},
		{"observed in sync is verified", row(LocalPaid, "pi_1", old), seen(ExtSucceeded),
			Decision{Verdict: InSync, Verified: true}},
		{"unknown provider status is reviewed", row(LocalPaid, "pi_1", old), seen("on_fire"),
			Decision{Verdict: NeedsReview, Kind: KindUnknownExternalStatus, Verified: true}},
		{"pending without provider reference past grace", row(LocalPending, "", old), Observation{},
			Decision{Verdict: NeedsReview, Kind: KindMissingProviderReference, Verified: true}},
		{"paid without provider reference", row(LocalPaid, "", old), Observation{},
			Decision{Verdict: NeedsReview, Kind: KindMissingProviderReference, Verified: true}},
		{"failed without provider reference is fine", row(LocalFailed, "", old), Observation{},
			Decision{Verdict: InSync, Verified: true}},
		{"pending without reference within grace waits", row(LocalPending, "", now), Observation{},
			Decision{Verdict: InFlight}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Decide(c.row, c.obs, now, grace); got != c.want {
				t.Errorf("Decide = %+v, want %+v", got, c.want)
			}
		})
	}
}
