package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU
// times. It is 100 on every Linux architecture Go supports (the kernel
// exports 100 to user space whatever its internal HZ).
const clockTicks = 100

// Usage is what the kernel has counted for a process so far.
type Usage struct {
	// CPU is the user and system time of the process, plus that of the
	// children it has waited for (a PostgreSQL server's backends that
	// ended during a run are counted through the postmaster this way).
	CPU time.Duration
	// RSS is the resident set now, and PeakRSS its high-water mark since
	// the process started or since ResetPeakRSS.
	RSS, PeakRSS int64
}

// ReadUsage reads pid's counters from /proc.
func ReadUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	cpu, err := statCPU(stat)
	if err != nil {
		return Usage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, err
	}
	u := Usage{CPU: cpu}
	u.RSS, _ = statusKiB(status, "VmRSS:")
	u.PeakRSS, _ = statusKiB(status, "VmHWM:")
	return u, nil
}

// TreeUsage adds up ReadUsage over pid and every live descendant: a
// server that forks a process per connection (PostgreSQL), or a launcher
// script and the JVM it started. PeakRSS is the largest single process's,
// not a sum: peaks of different processes need not coincide.
func TreeUsage(pid int) (Usage, error) {
	total, err := ReadUsage(pid)
	if err != nil {
		return Usage{}, err
	}
	for _, c := range descendants(pid) {
		u, err := ReadUsage(c)
		if err != nil {
			continue // it ended between the listing and the read
		}
		total.CPU += u.CPU
		total.RSS += u.RSS
		total.PeakRSS = max(total.PeakRSS, u.PeakRSS)
	}
	return total, nil
}

// ResetPeakRSS sets pid's high-water mark back to its current resident
// set (Linux's clear_refs "5"), so a later PeakRSS is the peak of what ran
// in between: one phase of a benchmark in a process that ran others before.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// statCPU reads utime, stime, cutime and cstime (fields 14–17) from a
// /proc/<pid>/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func statCPU(stat []byte) (time.Duration, error) {
	f, err := statFields(stat)
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, i := range []int{14, 15, 16, 17} {
		n, err := strconv.ParseInt(f[i-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("field %d: %w", i, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// statFields returns the fields after the command name: index 0 is field
// 3 (state), index 1 field 4 (ppid), and so on.
func statFields(stat []byte) ([]string, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return nil, errors.New("no command name")
	}
	f := strings.Fields(string(stat[end+1:]))
	if len(f) < 15 {
		return nil, fmt.Errorf("%d fields after the command name", len(f))
	}
	return f, nil
}

// statusKiB reads a "Name:   1234 kB" line of /proc/<pid>/status, in bytes.
func statusKiB(status []byte, name string) (int64, bool) {
	for line := range strings.Lines(string(status)) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		return n * 1024, err == nil
	}
	return 0, false
}

// descendants lists pid's children, their children, and so on, from each
// process's parent in /proc/<pid>/stat.
func descendants(root int) []int {
	children := map[int][]int{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		f, err := statFields(b)
		if err != nil {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// ListenerPID finds the process listening on the local TCP port: the
// broker or database server a benchmark measures, found by the address its
// clients use rather than by a guess at its command line. It reads
// /proc/net/tcp{,6} for the listening socket and /proc/*/fd for its owner,
// so it sees only processes the caller may inspect (all of them as root).
func ListenerPID(port int) (int, error) {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			// sl local_address rem_address st … inode (field 9); st 0A is LISTEN.
			if len(f) < 10 || f[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); ok && err == nil && int(p) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("nothing listens on port %d", port)
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && inodes[target] {
			return strconv.Atoi(strings.Split(fd, "/")[2])
		}
	}
	return 0, fmt.Errorf("the listener on port %d belongs to a process this user cannot inspect", port)
}

// MachineCPU is the CPU time all cores together have spent busy since boot
// (/proc/stat's first line: user, nice, system, irq, softirq, steal; idle
// and iowait left out). The difference over a run, divided by the run's
// length and the core count, is how busy the machine was: whether a
// latency figure was measured on a saturated machine.
func MachineCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return statMachineCPU(b)
}

// BusyShare is the share of the machine's cores (0 to 1) that machine, a
// difference of MachineCPU, kept busy over wall.
func BusyShare(machine, wall time.Duration) float64 {
	return machine.Seconds() / max(wall.Seconds(), 1e-9) / float64(runtime.NumCPU())
}

func statMachineCPU(stat []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line)) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q is not the cpu total", line)
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: field %d: %w", i, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
