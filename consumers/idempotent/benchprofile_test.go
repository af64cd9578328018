package idempotent_test

import (
	"bytes"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// cpuBuckets name where a sample of the benchmark process's CPU profile
// went: the innermost frame of its stack that matches one of them
// (allocation and other runtime frames count with their caller's). A
// sample none of them matches is the runner's when the runner is on its
// stack: its helpers run inside the envelope's decoding too.
var cpuBuckets = []struct{ match, name string }{
	{"runtime.gcBgMarkWorker", "garbage collector"},
	{"crypto/tls.", "TLS (the broker connection)"},
	{"schemas.(*Catalog).ValidateAs", "schema validation"},
	{"consumers/idempotent.decodeEnvelope", "envelope"},
	{"schemas/contract.Decode", "typed decode (handler)"},
	{"github.com/jackc/pgx", "pgx (dedupe and handler statements)"},
	{"github.com/twmb/franz-go", "franz-go (fetch)"},
}

const runnerFrames = "consumers/idempotent."

// profileCPU profiles this process until the returned function is called,
// which says where the time went, per event of n, largest first. It says
// why not when the profiler is busy (go test -cpuprofile holds it).
func profileCPU(n int) func() string {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		return func() string { return "not profiled: " + err.Error() }
	}
	return func() string {
		pprof.StopCPUProfile()
		p, err := profile.Parse(&buf)
		if err != nil {
			return "not profiled: " + err.Error()
		}
		return cpuBreakdown(p, n)
	}
}

// cpuBreakdown sums p's CPU samples by cpuBuckets, in µs per event of n.
func cpuBreakdown(p *profile.Profile, n int) string {
	cpu := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if cpu < 0 || n == 0 {
		return "not profiled: no cpu samples"
	}
	by := map[string]time.Duration{}
	var total time.Duration
	for _, s := range p.Sample {
		d := time.Duration(s.Value[cpu])
		total += d
		by[bucketOf(s)] += d
	}
	names := make([]string, 0, len(by))
	for name := range by {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return int(by[b] - by[a]) })
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %.1f", name, perEvent(by[name], n))
	}
	return fmt.Sprintf("%s; in all %.1f", strings.Join(parts, ", "), perEvent(total, n))
}

func bucketOf(s *profile.Sample) string {
	runner := false
	for _, loc := range s.Location { // innermost first
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			for _, b := range cpuBuckets {
				if strings.Contains(line.Function.Name, b.match) {
					return b.name
				}
			}
			runner = runner || strings.Contains(line.Function.Name, runnerFrames)
		}
	}
	if runner {
		return "runner"
	}
	return "other (scheduler, runtime, syscalls)"
}

func perEvent(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
