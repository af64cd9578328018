package chaostest

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// A fault is one thing done to the deployment, at an offset into the load.
type fault struct {
	at     time.Duration
	kind   string // kill, pause, postgres, kafka
	victim string // the process (kill, pause)
	down   time.Duration
}

const (
	faultKill     = "kill"     // SIGKILL, restarted after down
	faultPause    = "pause"    // SIGSTOP, SIGCONT after down
	faultPostgres = "postgres" // the private server stopped, started after down
	faultLeader   = "leader"   // the Kafka node leading the order events killed, restarted after down
	faultBroker   = "broker"   // another Kafka node stopped, started after down
)

// plan draws the run's faults from its seed: c.kills of every victim and
// c.pauses of service instances, between 10% and 80% of the load, and in
// the full form one database and one broker restart. The same seed and
// victims give the same plan.
func plan(c config, victims []string) []fault {
	victims = slices.Sorted(slices.Values(victims))
	rng := rand.New(rand.NewPCG(c.seed, 0xc4a05))
	at := func() time.Duration { return time.Duration((0.1 + 0.7*rng.Float64()) * float64(c.load)) }
	var fs []fault
	for _, v := range victims {
		for range c.kills {
			fs = append(fs, fault{at: at(), kind: faultKill, victim: v, down: time.Duration(300+rng.IntN(1200)) * time.Millisecond})
		}
	}
	var instances []string
	for _, v := range victims {
		if strings.HasSuffix(v, "-0") || strings.HasSuffix(v, "-1") {
			instances = append(instances, v)
		}
	}
	for range c.pauses {
		fs = append(fs, fault{at: at(), kind: faultPause, victim: instances[rng.IntN(len(instances))], down: c.pauseFor})
	}
	if c.full {
		fs = append(fs, fault{at: c.load * 30 / 100, kind: faultPostgres, down: 5 * time.Second},
			fault{at: c.load * 50 / 100, kind: faultLeader, down: 10 * time.Second},
			fault{at: c.load * 70 / 100, kind: faultBroker, down: 5 * time.Second})
	}
	slices.SortFunc(fs, func(a, b fault) int { return cmp.Compare(a.at, b.at) })
	return fs
}

// inject carries out the faults from now on. Faults of one process (and
// the restarts of the stack) happen one after another, in plan order; the
// returned channel closes when every fault is over and every process runs
// again.
func (d *deployment) inject(ctx context.Context, fs []fault) <-chan struct{} {
	start := time.Now()
	byTarget := map[string][]fault{}
	for _, f := range fs {
		key := f.victim
		if f.victim == "" {
			key = "stack"
		}
		byTarget[key] = append(byTarget[key], f)
	}
	var wg sync.WaitGroup
	for _, list := range byTarget {
		wg.Go(func() {
			for _, f := range list {
				if !wait(ctx, time.Until(start.Add(f.at))) {
					return
				}
				d.apply(ctx, f)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

func (d *deployment) apply(ctx context.Context, f fault) {
	switch f.kind {
	case faultKill:
		p := d.procs[f.victim]
		p.Kill()
		wait(ctx, f.down)
		if err := p.Restart(); err != nil {
			d.t.Errorf("restart %s: %v", f.victim, err)
		}
	case faultPause:
		p := d.procs[f.victim]
		if err := p.Pause(); err != nil {
			d.t.Errorf("pause %s: %v", f.victim, err)
			return
		}
		wait(ctx, f.down)
		if err := p.Resume(); err != nil {
			d.t.Errorf("resume %s: %v", f.victim, err)
		}
	case faultPostgres:
		d.pg.Stop(d.t)
		wait(ctx, f.down)
		d.pg.Start(d.t)
	case faultLeader:
		k := d.leaderNode(ctx)
		k.Kill(d.t)
		wait(ctx, f.down)
		k.Start(d.t)
	case faultBroker:
		k := d.leaderNode(ctx)
		for _, n := range d.kafka.Nodes {
			if n != k {
				k = n
				break
			}
		}
		k.Stop(d.t)
		wait(ctx, f.down)
		k.Start(d.t)
	}
}

// wait lets d pass (a fault's outage, not a synchronisation); false when
// the test ends first.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// summarize counts the plan's faults by kind.
func summarize(fs []fault) string {
	n := map[string]int{}
	var restarts []string
	for _, f := range fs {
		n[f.kind]++
		if what, ok := map[string]string{faultPostgres: "PostgreSQL stopped", faultLeader: "the Kafka partition leader killed",
			faultBroker: "another Kafka node stopped"}[f.kind]; ok {
			restarts = append(restarts, fmt.Sprintf("%s at %s for %s", what, f.at.Round(time.Second), f.down))
		}
	}
	s := fmt.Sprintf("%d kills (every service instance, provider-sim and the reconciler), %d pauses", n[faultKill], n[faultPause])
	if len(restarts) > 0 {
		s += ", " + strings.Join(restarts, ", ")
	}
	return s
}
