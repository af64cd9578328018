// Package proc runs the child processes of tests and of the demo: a
// service, a relay, a private broker or database that the caller starts
// with its own arguments and environment, waits for, pauses, kills and
// restarts.
//
// Every child runs in its own process group, and signals go to the group:
// a launcher script's children (the JVM behind a broker script) get them
// too, and a Ctrl-C on the caller's terminal reaches only the caller, which
// then stops its children in the order it chooses. Output goes to a log
// file, appended across restarts, so a failing test can show what a
// process said before it died (see Start's cleanup).
package proc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Command is what to run.
type Command struct {
	// Name names the process in errors and logs ("payment-svc").
	Name string
	// Path is the executable (a path, or a name looked up in PATH) and
	// Args its arguments.
	Path string
	Args []string
	// Env is added to the caller's environment; a later entry wins over
	// an earlier one with the same name.
	Env []string
	// Dir is the working directory; empty means the caller's.
	Dir string
	// Log is the file stdout and stderr go to. It is created if missing
	// and appended to, so a restarted process continues the same log.
	Log string
	// Credential runs the process as another user (PostgreSQL refuses to
	// run as root); nil runs it as the caller.
	Credential *syscall.Credential
}

// ErrKilled is wrapped by Stop when the process did not exit within its
// grace period after the stop signal and was killed.
var ErrKilled = errors.New("did not exit in time; killed")

// Process is a running (or exited) child. Its methods are safe for
// concurrent use.
type Process struct {
	cmd Command

	mu   sync.Mutex
	pid  int
	done chan struct{} // closed when the current run has exited
	err  error         // the current run's exit error, set before done closes
}

// Run starts cmd.
func Run(cmd Command) (*Process, error) {
	p := &Process{cmd: cmd}
	if err := p.Restart(); err != nil {
		return nil, err
	}
	return p, nil
}

// Start starts cmd for a test: it fails the test if the process does not
// start, kills it when the test ends, and logs the tail of its log if the
// test failed.
func Start(t testing.TB, cmd Command) *Process {
	t.Helper()
	p, err := Run(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s log (tail):\n%s", p.cmd.Name, p.LogTail(4000))
		}
	})
	return p
}

// Restart starts the process again with the same command line, after it
// exited or was stopped. It fails if the process is still running.
func (p *Process) Restart() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s is already running (pid %d)", p.cmd.Name, p.pid)
		}
	}
	logf, err := os.OpenFile(p.cmd.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: log: %w", p.cmd.Name, err)
	}
	c := exec.Command(p.cmd.Path, p.cmd.Args...)
	c.Env = append(os.Environ(), p.cmd.Env...)
	c.Dir = p.cmd.Dir
	c.Stdout, c.Stderr = logf, logf
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cmd.Credential}
	if err := c.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.cmd.Name, err)
	}
	done := make(chan struct{})
	p.pid, p.done, p.err = c.Process.Pid, done, nil
	go func() {
		err := c.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Name is the command's name.
func (p *Process) Name() string { return p.cmd.Name }

// PID is the current run's process id (of the process group's leader).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pid
}

// LogPath is the file the process logs to.
func (p *Process) LogPath() string { return p.cmd.Log }

// Exited is closed when the current run of the process has exited.
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Running reports whether the process has started and not yet exited.
func (p *Process) Running() bool {
	select {
	case <-p.Exited():
		return false
	default:
		return true
	}
}

// ExitErr is how the last run ended: nil for exit status 0, an
// *exec.ExitError otherwise (see KilledBy). It is nil while running.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// KilledBy reports whether the last run was ended by sig.
func (p *Process) KilledBy(sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(p.ExitErr(), &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// Signal sends sig to the process group. It does nothing once the process
// has exited.
func (p *Process) Signal(sig syscall.Signal) error {
	if !p.Running() {
		return nil
	}
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s: %v: %w", p.cmd.Name, sig, err)
	}
	return nil
}

// Kill kills the process with SIGKILL, as a crash would, and waits for
// it, the rest of its process group and every process it had started to
// exit. A child that leads a process group of its own escapes the signal
// (PostgreSQL's backends call setsid) and exits when it notices its parent
// died: a killed PostgreSQL's backends hold its shared memory until they
// are gone, and a server restarted before that refuses to start
// ("pre-existing shared memory block is still in use"). It returns an
// error naming the processes still alive 30 s after the signal: a
// process that outlives its parent, which a test cannot leave behind.
func (p *Process) Kill() error {
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	children := descendants(pid)
	_ = p.Signal(syscall.SIGKILL)
	<-p.Exited()
	if err := waitGone(append(children, -pid), killWait); err != nil {
		return fmt.Errorf("%s killed: %w", p.cmd.Name, err)
	}
	return nil
}

// killWait is how long Kill waits for the killed processes to be gone.
var killWait = 30 * time.Second

// waitGone polls until none of pids (a negative one: a process group) is
// alive, for at most timeout.
func waitGone(pids []int, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); ; time.Sleep(5 * time.Millisecond) { // the kernel tells no one when a process ends
		var alive []int
		for _, pid := range pids {
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still alive after %s", alive, timeout)
		}
	}
}

// Pause stops the process with SIGSTOP: it keeps its sockets and memory
// but runs no code (a long GC pause, a frozen VM), until Resume.
//
// It returns once the kernel reports the process stopped: SIGSTOP takes
// effect asynchronously, and a caller that checks the pause right away
// (a request that must not be answered) would otherwise race it.
func (p *Process) Pause() error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.mu.Lock()
	pid := p.pid
	p.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for p.Running() {
		if stopped(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not stopped 5s after SIGSTOP", p.cmd.Name)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// stopped reports whether /proc says the process is stopped by a signal
// (state T).
func stopped(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold spaces or parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
}

// Resume continues a paused process (SIGCONT).
func (p *Process) Resume() error { return p.Signal(syscall.SIGCONT) }

// Stop asks the process to exit with sig (SIGTERM for a graceful drain;
// PostgreSQL takes SIGINT for a fast shutdown) and waits up to grace. A
// process that is still running then is killed, and Stop returns an error
// wrapping ErrKilled. A paused process is resumed so that it can exit.
// How the process exited is ExitErr's.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) error {
	if !p.Running() {
		return nil
	}
	_ = p.Signal(sig)
	_ = p.Resume()
	select {
	case <-p.Exited():
		return nil
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s after %v for %s: %w", p.cmd.Name, sig, grace, ErrKilled)
	}
}

// WaitReady polls url until it answers 200 OK. It fails early when the
// process exits, and when ctx ends or timeout passes first.
func (p *Process) WaitReady(ctx context.Context, url string, timeout time.Duration) error {
	return p.WaitFor(ctx, timeout, "ready at "+url, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	})
}

// WaitFor polls cond every 100ms until it returns nil. It fails early when
// the process exits, and when ctx ends or timeout passes first; the error
// names what was waited for, cond's last error and the log file.
func (p *Process) WaitFor(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		try, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := cond(try)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited (%v) before it was %s; see %s", p.cmd.Name, p.ExitErr(), what, p.cmd.Log)
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%s not %s after %s: %v; see %s", p.cmd.Name, what, timeout, err, p.cmd.Log)
		case <-tick.C:
		}
	}
}

// Log returns what the process logged so far, across restarts.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.cmd.Log)
	return string(b)
}

// LogTail returns about the last n bytes of the log, from a line start.
func (p *Process) LogTail(n int) string {
	s := p.Log()
	if len(s) <= n {
		return s
	}
	return "…" + s[strings.LastIndex(s[:len(s)-n], "\n")+1:]
}

// GoBuild builds the Go packages pkgs (paths relative to dir, the module
// or package directory) into out: a file for one main package, a directory
// (ending in "/") for several. The error carries the compiler's output.
func GoBuild(dir, out string, pkgs ...string) error {
	c := exec.Command("go", append([]string{"build", "-o", out}, pkgs...)...)
	c.Dir = dir
	if b, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, b)
	}
	return nil
}

// MainWithBinaries is the TestMain of tests that run the project's binaries
// as processes: it builds pkgs (paths relative to the test's package) into
// a temporary directory, sets *dir to it, runs the tests and removes it. A
// failed build ends the test binary with its output.
func MainWithBinaries(m *testing.M, dir *string, pkgs ...string) {
	d, err := os.MkdirTemp("", "concord-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := GoBuild(".", d+"/", pkgs...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(d)
		os.Exit(1)
	}
	*dir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
