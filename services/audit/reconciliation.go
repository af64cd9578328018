package audit

import (
	"fmt"

	"github.com/concordhq/concord/services/reconciler"
)

// DriftHealed checks that every repairable finding is resolved, and that
// every payment a repair command moved went through the canonical writer
// under its finding's name (a transition with reconciler.RepairSource), not
// some side path.
func DriftHealed(s Snapshot) Result {
	r := Result{Check: "every repairable drift healed through the canonical writer"}
	type written struct {
		payment int64
		source  string
	}
	transitions := map[written]bool{}
	for _, t := range s.Transitions {
		transitions[written{t.PaymentID, t.Source}] = true
	}
	var found, open, offPath int
	for _, f := range s.Findings {
		subject := fmt.Sprintf("finding %d (payment %d, %s)", f.ID, f.PaymentID, f.Kind)
		if f.Verdict == reconciler.Repairable {
			found++
			if f.ResolvedAt == nil {
				open++
				r.Violations = append(r.Violations, Violation{subject, "repairable and still open"})
			}
		}
		if f.Resolution == reconciler.ResolutionRepaired && !transitions[written{f.PaymentID, reconciler.RepairSource(f.ID)}] {
			offPath++
			r.Violations = append(r.Violations, Violation{subject, "repaired without its writer transition"})
		}
	}
	r.Summary = fmt.Sprintf("%d found, %d open, %d repaired without their writer transition", found, open, offPath)
	return r
}

// NothingForReview checks that no needs_review finding is open. Where the
// faults injected move no money the wrong way (the demo's), a finding a
// person must review is a bug.
func NothingForReview(s Snapshot) Result {
	r := Result{Check: "no drift left for review"}
	for _, f := range s.Findings {
		if f.Verdict == reconciler.NeedsReview && f.ResolvedAt == nil {
			r.Violations = append(r.Violations, Violation{fmt.Sprintf("finding %d (payment %d)", f.ID, f.PaymentID),
				fmt.Sprintf("%s needs review", f.Kind)})
		}
	}
	r.Summary = fmt.Sprintf("%d open needs_review findings", len(r.Violations))
	return r
}
