package chaostest

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit/proc"
	"github.com/concordhq/concord/services/audit"
	"github.com/concordhq/concord/services/audit/auditsnapshot"
	"github.com/concordhq/concord/services/internal/loadgen"
)

var binDir string

func TestMain(m *testing.M) {
	var pkgs []string
	for _, name := range binaries {
		pkgs = append(pkgs, "../../cmd/"+name)
	}
	proc.MainWithBinaries(m, &binDir, pkgs...)
}

// binaries are the processes a chaos run starts.
var binaries = []string{"provider-sim", "carrier-sim", "order-svc", "inventory-svc", "payment-svc", "shipping-svc", "orchestrator", "reconciler"}

// config is one run's shape, from the environment.
type config struct {
	full     bool          // private broker and database, restarted too
	seed     uint64        // the fault schedule and the order mix
	rate     float64       // orders offered per second
	load     time.Duration // how long orders are offered
	kills    int           // SIGKILLs of each process
	pauses   int           // SIGSTOPs, of instances picked by the seed
	pauseFor time.Duration
	// maxTimedOut is the share of orders the stuck-order timeout may
	// cancel.
	maxTimedOut float64
}

func configFromEnv(t *testing.T) config {
	c := config{seed: 1, rate: 25, load: 30 * time.Second, kills: 2, pauses: 3, pauseFor: 5 * time.Second, maxTimedOut: 0.02}
	if os.Getenv("CONCORD_CHAOS") == "full" {
		c.full, c.rate, c.load = true, 20, 4*time.Minute
	}
	if v := os.Getenv("CONCORD_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CONCORD_CHAOS_SEED %q: %v", v, err)
		}
		c.seed = n
	}
	if v := os.Getenv("CONCORD_CHAOS_LOAD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("CONCORD_CHAOS_LOAD %q: want a positive duration", v)
		}
		c.load = d
	}
	if v := os.Getenv("CONCORD_CHAOS_RATE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			t.Fatalf("CONCORD_CHAOS_RATE %q: want a positive number of orders per second", v)
		}
		c.rate = f
	}
	return c
}

// settleBound is how long the deployment may take to settle once the load
// and the faults are over.
const settleBound = 3 * time.Minute

// TestChaos is the whole pipeline under load and faults; see the package
// comment for what it does and checks.
func TestChaos(t *testing.T) {
	c := configFromEnv(t)
	form := "short form: service faults on the shared stack"
	if c.full {
		form = "full form: service faults, a PostgreSQL restart and Kafka nodes lost on a private 3-node cluster"
	}
	fmt.Printf("chaos: seed %d, %s of load at %.0f orders/s, %s\n", c.seed, c.load, c.rate, form)
	d := deploy(t, c)
	ctx := t.Context()

	stocked := d.stock(20, 1_000_000)
	stalls := watchStalls(ctx, d.adm, d.groups)
	faults := plan(c, d.victims())
	done := d.inject(ctx, faults)

	res, err := loadgen.Run(ctx, loadgen.Config{OrderURL: d.orderURL, APIKey: d.orderKey, Orders: int(c.rate * c.load.Seconds()), Rate: c.rate,
		Concurrency: 32, SKUs: 20, OrchestratedShare: 0.3, Seed: c.seed})
	if err != nil {
		t.Fatal(err)
	}
	<-done // every process restarted and resumed
	settleStart := time.Now()
	err = auditsnapshot.WaitQuiet(ctx, d.sources(), d.adm, d.groups, settleBound, nil)
	settled := time.Since(settleStart)
	longest := stalls.stop()

	snap, rerr := auditsnapshot.Read(ctx, d.sources())
	if rerr != nil {
		t.Fatal(rerr)
	}
	checks := append(audit.Saga(snap, c.load+settleBound, stocked), audit.Reconciliation(snap)...)
	checks = append(checks, acknowledgedOrdersKept(snap, res))
	timedOut := d.timedOut(ctx)

	fmt.Printf("  faults: %s\n", summarize(faults))
	fmt.Printf("  orders: %d offered, %d accepted, %d refused or lost in flight by the API (retried %d times each)\n",
		int(c.rate*c.load.Seconds()), len(res.Created), res.Failed, 5)
	for _, line := range d.outcomes(ctx) {
		fmt.Printf("    %s\n", line)
	}
	share := 0.0
	if len(res.Created) > 0 {
		share = float64(timedOut) / float64(len(res.Created))
	}
	fmt.Printf("  cancelled by a timeout: %d (%.2f%%; at most %.0f%%)\n", timedOut, share*100, c.maxTimedOut*100)
	fmt.Println("  longest stall per consumer group (lag above zero, committed offsets standing still):")
	for _, g := range slices.Sorted(maps.Keys(longest)) {
		fmt.Printf("    %-16s %s\n", strings.TrimPrefix(g, d.prefix), longest[g].Round(10*time.Millisecond))
	}
	if err != nil {
		fmt.Printf("  NOT SETTLED: %v\n", err)
	} else {
		fmt.Printf("  settled %s after the last fault and order\n", settled.Round(10*time.Millisecond))
	}
	fmt.Println("  invariants:")
	var failed []error
	for _, r := range checks {
		mark := "PASS"
		if !r.Holds() {
			mark = "FAIL"
			failed = append(failed, fmt.Errorf("%s: %s", r.Check, r.Detail()))
		}
		fmt.Printf("    %s  %s — %s\n", mark, r.Check, r.Detail())
	}
	if err != nil {
		failed = append(failed, err)
	}
	explained := 0
	for _, r := range checks {
		for _, v := range r.Violations {
			if id, ok := strings.CutPrefix(v.Subject, "saga "); ok && explained < 5 {
				if explained == 0 {
					fmt.Println("  sagas that broke a check, as the services hold them:")
				}
				d.explain(ctx, id)
				explained++
			}
		}
	}
	if share > c.maxTimedOut {
		failed = append(failed, fmt.Errorf("%d of %d orders (%.2f%%) cancelled by a timeout; at most %.0f%% may be",
			timedOut, len(res.Created), share*100, c.maxTimedOut*100))
	}
	if len(failed) > 0 {
		t.Fatalf("chaos run with seed %d broke a promise:\n%v", c.seed, errors.Join(failed...))
	}
	fmt.Println("RESULT: PASS")
}

// acknowledgedOrdersKept checks that every order the API accepted exists:
// an answer 201 is a promise.
func acknowledgedOrdersKept(s audit.Snapshot, res loadgen.Result) audit.Result {
	r := audit.Result{Check: "every accepted order kept"}
	have := make(map[string]bool, len(s.Orders))
	for _, o := range s.Orders {
		have[o.ID] = true
	}
	for _, c := range res.Created {
		if !have[c.ID] {
			r.Violations = append(r.Violations, audit.Violation{Subject: c.ID, Problem: "accepted, but order-svc has no such order"})
		}
	}
	r.Summary = fmt.Sprintf("%d accepted, %d in order-svc", len(res.Created), len(s.Orders))
	return r
}
