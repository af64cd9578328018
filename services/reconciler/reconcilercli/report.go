package reconcilercli

import (
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/concordhq/concord/services/reconciler"
)

// The printed reports of status, once and heal.

func printStatus(w io.Writer, st reconciler.Status) {
	fmt.Fprintf(w, "payments: %d\nreconciliation lag: %s (the longest any payment has gone unverified)\n",
		st.Payments, st.Lag.Round(time.Second))
	for _, c := range st.Cursors {
		fmt.Fprintf(w, "job %s: at id %d, current cycle age %s, cycles completed %d", c.Job, c.LastID,
			st.Now.Sub(c.CycleStartedAt).Round(time.Second), c.CyclesCompleted)
		if c.LastCycleCompletedAt != nil {
			fmt.Fprintf(w, ", last cycle completed %s ago", st.Now.Sub(*c.LastCycleCompletedAt).Round(time.Second))
		}
		if c.LastCycleDuration != nil {
			fmt.Fprintf(w, " (took %s)", c.LastCycleDuration.Round(time.Millisecond))
		}
		fmt.Fprintln(w)
	}
	if len(st.Cursors) == 0 {
		fmt.Fprintln(w, "no cycle has started yet")
	}
	kinds := make([]string, 0, len(st.OpenFindings))
	total := 0
	for k, n := range st.OpenFindings {
		kinds = append(kinds, string(k))
		total += n
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "open findings: %d\n", total)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-40s %d\n", k, st.OpenFindings[reconciler.Kind(k)])
	}
}

func printCounts(w io.Writer, counts map[reconciler.Verdict]int) {
	for _, v := range reconciler.Verdicts {
		fmt.Fprintf(w, "  %-14s %d\n", v, counts[v])
	}
}

func printCycle(w io.Writer, r reconciler.CycleReport) {
	fmt.Fprintf(w, "cycle: %d batches in %s, %d provider calls, %.4f calls per verified row\n",
		r.Batches, r.Duration.Round(time.Millisecond), r.Calls, r.CallsPerVerifiedRow())
	printCounts(w, r.Counts)
	fmt.Fprintf(w, "findings opened: %d, repair commands: %d, findings cleared: %d, rows moved meanwhile: %d, batches lost to a concurrent run: %d\n",
		r.FindingsOpened, r.CommandsEmitted, r.FindingsCleared, r.Moved, r.Concurrent)
}

func printHeal(w io.Writer, r reconciler.HealReport) {
	fmt.Fprintf(w, "heal %s..%s: %d events in %d pages, %d payments (%d unknown locally), %d provider calls\n",
		r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.Events, r.Pages, r.Payments, r.Unknown, r.Calls)
	printCounts(w, r.Counts)
	fmt.Fprintf(w, "findings opened: %d, repair commands: %d\n", r.FindingsOpened, r.CommandsEmitted)
}
