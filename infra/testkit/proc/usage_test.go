package proc

import (
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestStatCPUCountsFromTheLastParenthesis(t *testing.T) {
	// A command name with spaces and a ')' must not shift the fields:
	// utime 150, stime 50, cutime 30, cstime 20 ticks = 2.5 s.
	line := []byte("4242 (odd ) name) S 1 4242 4242 0 -1 4194304 100 0 0 0 150 50 30 20 20 0 4 0 100 1000 200 ...")
	got, err := statCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2500 * time.Millisecond; got != want {
		t.Fatalf("cpu %v, want %v", got, want)
	}
}

func TestStatMachineCPUCountsBusyTimeOnly(t *testing.T) {
	// user 100, nice 10, system 50, idle 9000, iowait 700, irq 5, softirq 15,
	// steal 20, guest 40, guest_nice 0 ticks: busy is 200 ticks = 2 s. Idle
	// and iowait are not busy; guest time is already in user.
	stat := []byte("cpu  100 10 50 9000 700 5 15 20 40 0\ncpu0 50 5 25 4500 350 2 7 10 20 0\n")
	got, err := statMachineCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * time.Second; got != want {
		t.Fatalf("busy %v, want %v", got, want)
	}
	if _, err := statMachineCPU([]byte("intr 1 2 3\n")); err == nil {
		t.Fatal("a first line other than the cpu total was accepted")
	}
}

func TestStatusKiBReadsTheNamedLineInBytes(t *testing.T) {
	status := []byte("Name:\tx\nVmHWM:\t   2048 kB\nVmRSS:\t    1024 kB\n")
	if n, ok := statusKiB(status, "VmHWM:"); !ok || n != 2048*1024 {
		t.Fatalf("VmHWM %d %v", n, ok)
	}
	if n, ok := statusKiB(status, "VmRSS:"); !ok || n != 1024*1024 {
		t.Fatalf("VmRSS %d %v", n, ok)
	}
	if _, ok := statusKiB(status, "VmSwap:"); ok {
		t.Fatal("a missing line was read")
	}
}

func TestResetPeakRSSForgetsAnEarlierPeak(t *testing.T) {
	pid := os.Getpid()
	big := make([]byte, 64<<20)
	for i := range big {
		big[i] = 1
	}
	before, err := ReadUsage(pid)
	if err != nil {
		t.Fatal(err)
	}
	big = nil
	// Give the pages back so the resident set falls below the peak.
	debug.FreeOSMemory()
	if err := ResetPeakRSS(pid); err != nil {
		t.Fatal(err)
	}
	after, err := ReadUsage(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after.PeakRSS >= before.PeakRSS-32<<20 {
		t.Fatalf("peak %d MiB after the reset, %d MiB before: not reset", after.PeakRSS>>20, before.PeakRSS>>20)
	}
	_ = big
}

func TestListenerPIDFindsTheListeningProcess(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pid, err := ListenerPID(l.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	if pid != os.Getpid() {
		t.Fatalf("pid %d, want this test's %d", pid, os.Getpid())
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if pid, err := ListenerPID(port); err == nil {
		t.Fatalf("a closed listener still found, in pid %d", pid)
	}
}

func TestBusyShareIsOfEveryCore(t *testing.T) {
	cores := time.Duration(runtime.NumCPU())
	if got := BusyShare(cores*time.Second/2, time.Second); got != 0.5 {
		t.Fatalf("half of every core's second: %v, want 0.5", got)
	}
}
