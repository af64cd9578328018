package main

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"runtime"
	"strconv"

	"github.com/concordhq/concord/infra/testkit/proc"
)

// serviceRSSBudget is the resident-set budget of each service under
// `make bench-saga`; the report marks a process above it.
const serviceRSSBudget = 256 << 20

// measured is a process whose CPU time and memory the saga benchmark
// reports: every binary the demo started, the PostgreSQL server and the
// Kafka broker (found by the ports their clients use), and the demo
// itself, which generates the load.
type measured struct {
	name    string
	pid     int
	tree    bool // a server with child processes (PostgreSQL's backends)
	service bool // held to serviceRSSBudget
	before  proc.Usage
}

// startUsage finds the processes to measure, sets their peak resident set
// back to the present one (the shared PostgreSQL and broker ran before
// this run) and takes their CPU counters at the start of the load.
func startUsage(r *running, c config) []*measured {
	var ms []*measured
	for _, p := range r.procs {
		ms = append(ms, &measured{name: p.Name(), pid: p.PID(), service: isService(p.Name())})
	}
	if pid, err := listenerOf(c.adminURL); err == nil {
		ms = append(ms, &measured{name: "postgresql", pid: pid, tree: true})
	} else {
		fmt.Printf("    (PostgreSQL not measured: %v)\n", err)
	}
	if len(c.kafka.Brokers) > 0 {
		if pid, err := listenerOf("//" + c.kafka.Brokers[0]); err == nil {
			ms = append(ms, &measured{name: "kafka", pid: pid})
		} else {
			fmt.Printf("    (Kafka not measured: %v)\n", err)
		}
	}
	ms = append(ms, &measured{name: "demo (load generator)", pid: os.Getpid()})
	for _, m := range ms {
		m.before, _ = m.read()
		_ = proc.ResetPeakRSS(m.pid)
	}
	return ms
}

func (m *measured) read() (proc.Usage, error) {
	if m.tree {
		return proc.TreeUsage(m.pid)
	}
	return proc.ReadUsage(m.pid)
}

// printUsage prints each process's CPU time per 1,000 terminal orders and
// its peak resident set since startUsage.
func printUsage(ms []*measured, orders int) {
	if orders == 0 || len(ms) == 0 {
		return
	}
	fmt.Printf("  CPU per 1,000 terminal orders and peak RSS, by process (%d orders):\n", orders)
	var total float64
	for _, m := range ms {
		now, err := m.read()
		if err != nil {
			fmt.Printf("    %-22s not measured: %v\n", m.name, err)
			continue
		}
		cpu := (now.CPU - m.before.CPU).Seconds() * 1000 / float64(orders)
		total += cpu
		peak := fmt.Sprintf("%6.0f MiB", float64(now.PeakRSS)/(1<<20))
		if m.tree {
			peak += " (largest process)"
		}
		if m.service && now.PeakRSS > serviceRSSBudget {
			peak += fmt.Sprintf("  OVER the %d MiB budget", serviceRSSBudget>>20)
		}
		fmt.Printf("    %-22s %7.2f CPU-s  peak %s\n", m.name, cpu, peak)
	}
	fmt.Printf("    %-22s %7.2f CPU-s  (PostgreSQL and Kafka count every client's work, not only this run's)\n", "all", total)
	// Every process of the saga shares this machine's cores, so the CPU an
	// order costs caps the throughput whatever the rate offered.
	if total > 0 {
		cores := float64(runtime.NumCPU())
		fmt.Printf("    at this CPU per order, %.0f cores finish at most %.0f orders/s; %d orders/s (the target) needs at most %.2f CPU-s per 1,000\n",
			cores, cores*1000/total, targetOrdersPerSecond, cores*1000/targetOrdersPerSecond)
	}
}

// targetOrdersPerSecond is the saga's throughput target on this machine
// (README "Benchmarks").
const targetOrdersPerSecond = 600

// isService tells the services (held to the memory budget) from the
// simulators of the outside world.
func isService(name string) bool {
	switch name {
	case "provider-sim", "carrier-sim", "broker-sim":
		return false
	}
	return true
}

// listenerOf finds the process listening on a URL's port on this machine.
func listenerOf(rawURL string) (int, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, err
	}
	_, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", u.Host, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return 0, err
	}
	return proc.ListenerPID(n)
}
