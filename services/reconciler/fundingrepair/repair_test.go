package fundingrepair

import (
	"testing"

	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingstore"
	"github.com/concordhq/concord/services/reconciler"
)

func TestResolution(t *testing.T) {
	for name, tc := range map[string]struct {
		res      fundingstore.Result
		target   funding.Status
		want     reconciler.Resolution
		wantNote string
	}{
		"the writer moved the record": {fundingstore.Result{Changed: true, Status: funding.Completed, Effect: funding.Apply},
			funding.Completed, reconciler.ResolutionRepaired, ""},
		"the stream got there first": {fundingstore.Result{Status: funding.Completed}, funding.Completed,
			reconciler.ResolutionAlreadyApplied, ""},
		"the record ended meanwhile": {fundingstore.Result{Status: funding.Reversed}, funding.Completed,
			reconciler.ResolutionSuperseded, "movement was REVERSED when the command (executed) arrived"},
		"the writer sent it to review": {fundingstore.Result{Review: true}, funding.Completed,
			reconciler.ResolutionSuperseded, "the writer sent the news to review"},
	} {
		how, note := Resolution(tc.res, tc.target, "executed")
		if how != tc.want || note != tc.wantNote {
			t.Errorf("%s: %s %q, want %s %q", name, how, note, tc.want, tc.wantNote)
		}
	}
}
