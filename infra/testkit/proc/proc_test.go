package proc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
	"github.com/concordhq/concord/infra/testkit/proc"
)

// The test binary is its own child: with PROC_TEST_CHILD set, it prints
// its arguments and one variable, serves /readyz on PROC_TEST_ADDR, and
// exits 0 on SIGTERM unless PROC_TEST_IGNORE_TERM is set.
func TestMain(m *testing.M) {
	if os.Getenv("PROC_TEST_CHILD") != "" {
		child()
		return
	}
	os.Exit(m.Run())
}

func child() {
	fmt.Printf("args %s greeting %s\n", strings.Join(os.Args[1:], " "), os.Getenv("GREETING"))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	ln, err := net.Listen("tcp", os.Getenv("PROC_TEST_ADDR"))
	if err != nil {
		fmt.Println(err)
		os.Exit(3)
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }))
	}()
	if os.Getenv("PROC_TEST_ESCAPE") != "" {
		// A child in a session of its own, which the group's SIGKILL
		// does not reach and which does not exit with its parent.
		c := exec.Command("sleep", "3600")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		fmt.Printf("escaped %d\n", c.Process.Pid)
	}
	for range sigs {
		if os.Getenv("PROC_TEST_IGNORE_TERM") == "" {
			fmt.Println("draining")
			os.Exit(0)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func startChild(t *testing.T, env ...string) (*proc.Process, string) {
	t.Helper()
	addr := freeAddr(t)
	p := proc.Start(t, proc.Command{Name: "child", Path: os.Args[0], Args: []string{"-a", "b"},
		Env: append([]string{"PROC_TEST_CHILD=1", "PROC_TEST_ADDR=" + addr, "GREETING=hello"}, env...),
		Log: filepath.Join(t.TempDir(), "child.log")})
	url := "http://" + addr + "/readyz"
	if err := p.WaitReady(context.Background(), url, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return p, url
}

func answers(url string) bool {
	c := http.Client{Timeout: 300 * time.Millisecond}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func TestStartPassesArgsAndEnvAndCapturesTheLog(t *testing.T) {
	p, _ := startChild(t)
	if got := p.Log(); !strings.Contains(got, "args -a b greeting hello") {
		t.Errorf("log = %q; want the arguments and the variable", got)
	}
}

func TestStopDrainsGracefullyAndRestartAppendsToTheLog(t *testing.T) {
	p, url := startChild(t)
	if err := p.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.ExitErr(); err != nil {
		t.Errorf("exit after SIGTERM = %v; want status 0", err)
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(context.Background(), url, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(p.Log(), "greeting hello"); n != 2 {
		t.Errorf("log holds %d runs; want 2", n)
	}
}

func TestStopKillsAProcessThatIgnoresTheSignal(t *testing.T) {
	p, _ := startChild(t, "PROC_TEST_IGNORE_TERM=1")
	err := p.Stop(syscall.SIGTERM, 300*time.Millisecond)
	if !errors.Is(err, proc.ErrKilled) || !p.KilledBy(syscall.SIGKILL) {
		t.Errorf("Stop = %v, killed by SIGKILL %v; want ErrKilled and SIGKILL", err, p.KilledBy(syscall.SIGKILL))
	}
}

func TestKillIsACrash(t *testing.T) {
	p, _ := startChild(t)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() || !p.KilledBy(syscall.SIGKILL) {
		t.Errorf("after Kill: running %v, exit %v; want killed by SIGKILL", p.Running(), p.ExitErr())
	}
	if err := p.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := p.Restart(); err == nil {
		t.Error("Restart of a running process succeeded; want an error")
	}
}

func TestKillNamesAChildThatOutlivesIt(t *testing.T) {
	defer proc.SetKillWait(200 * time.Millisecond)()
	p, _ := startChild(t, "PROC_TEST_ESCAPE=1")
	var escaped int
	testkit.Eventually(t, 10*time.Second, "the child names the process that escaped", func() error {
		i := strings.Index(p.Log(), "escaped ")
		if i < 0 {
			return errors.New("not yet")
		}
		_, err := fmt.Sscanf(p.Log()[i:], "escaped %d", &escaped)
		return err
	})
	defer syscall.Kill(escaped, syscall.SIGKILL)
	err := p.Kill()
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(escaped)) {
		t.Fatalf("Kill with process %d still alive = %v; want an error naming it", escaped, err)
	}
}

func TestPauseFreezesTheProcessUntilResume(t *testing.T) {
	p, url := startChild(t)
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if answers(url) {
		t.Fatal("a paused process answered")
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if !answers(url) {
		t.Fatal("a resumed process did not answer")
	}
}

func TestWaitReadyFailsAsSoonAsTheProcessExits(t *testing.T) {
	p := proc.Start(t, proc.Command{Name: "child", Path: os.Args[0], Log: filepath.Join(t.TempDir(), "child.log"),
		Env: []string{"PROC_TEST_CHILD=1", "PROC_TEST_ADDR=not-an-address"}})
	start := time.Now()
	err := p.WaitReady(context.Background(), "http://127.0.0.1:1/readyz", time.Minute)
	if err == nil || !strings.Contains(err.Error(), "exited") || time.Since(start) > 10*time.Second {
		t.Errorf("WaitReady = %v after %s; want an early 'exited' error", err, time.Since(start))
	}
}
