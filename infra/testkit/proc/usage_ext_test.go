package proc_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
)

// A process that burns CPU and then touches memory shows both in its own
// counters and in its parent's tree.
func TestTreeUsageSeesAChildsCPUAndMemory(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The child of sh spins until the flag file appears: real CPU time.
	flag := filepath.Join(dir, "stop")
	p, err := proc.Run(proc.Command{Name: "spin", Path: sh, Args: []string{"-c", "sh -c 'while [ ! -e " + flag + " ]; do :; done' & wait"},
		Log: filepath.Join(dir, "spin.log")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	defer os.WriteFile(flag, nil, 0o644) //nolint:errcheck
	var tree proc.Usage
	testkit.Eventually(t, 30*time.Second, "the spinning child's CPU time in the tree", func() error {
		tree, err = proc.TreeUsage(p.PID())
		if err != nil {
			return err
		}
		if tree.CPU < 100*time.Millisecond {
			return fmt.Errorf("tree cpu %v", tree.CPU)
		}
		return nil
	})
	own, err := proc.ReadUsage(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	if tree.CPU <= own.CPU {
		t.Fatalf("tree cpu %v, the shell's own %v: the spinning child is not counted", tree.CPU, own.CPU)
	}
	if tree.RSS <= own.RSS || tree.PeakRSS < own.RSS {
		t.Fatalf("tree rss %d peak %d, the shell's own rss %d", tree.RSS, tree.PeakRSS, own.RSS)
	}
}

// Kill returns only once every process of the group is gone, not just its
// leader: a child of the killed process still running would hold what the
// leader held (a killed PostgreSQL's backends hold its shared memory).
func TestKillWaitsForTheWholeProcessGroup(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := proc.Run(proc.Command{Name: "group", Path: sh, Args: []string{"-c", "sleep 1000 & sleep 1000 & wait"}, Log: filepath.Join(dir, "group.log")})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the shell's two children", func() error {
		if u, err := proc.TreeUsage(p.PID()); err != nil || u.RSS == 0 {
			return fmt.Errorf("tree %+v: %v", u, err)
		}
		return nil
	})
	p.Kill()
	if err := syscall.Kill(-p.PID(), 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("a process of group %d is still there after Kill returned (kill -0: %v)", p.PID(), err)
	}
}
