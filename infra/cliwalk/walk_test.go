package cliwalk

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/kit"
)

// repoRoot is the directory holding go.work, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.work not found above the test")
		}
		dir = parent
	}
}

// mains finds every main package of the repository: each directory
// whose main.go says package main (binaries under cmd/, the test helpers
// under internal/, the examples), by module.
func mains(t *testing.T, root string) map[string][]string {
	t.Helper()
	byModule := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "bin" || n == "testdata") {
				return filepath.SkipDir
			}
			// A module nested in one of the workspace's (a benchmark's
			// peer, relay/peers/watermill) is outside the workspace and
			// ships no Concord binary.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root && filepath.Dir(path) != root {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "main.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !regexp.MustCompile(`(?m)^package main$`).Match(src) {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		module, pkg, _ := strings.Cut(rel, string(filepath.Separator))
		byModule[module] = append(byModule[module], "./"+pkg)
		return nil
	})
	if err != nil || len(byModule) == 0 {
		t.Fatalf("no main packages found under %s: %v", root, err)
	}
	return byModule
}

// buildAll builds every main package into one directory and returns the
// binaries' paths by name.
func buildAll(t *testing.T) map[string]string {
	t.Helper()
	root := repoRoot(t)
	byModule := mains(t, root)
	out := t.TempDir()
	bins := map[string]string{}
	for module, pkgs := range byModule {
		// The version as `make build` sets it; the commit comes from the
		// build information where Go stamps it (not in a git worktree).
		args := []string{"build", "-ldflags", "-X github.com/concordhq/concord/infra/kit.version=" + walkVersion, "-o", out + string(filepath.Separator)}
		cmd := exec.Command("go", append(args, pkgs...)...)
		cmd.Dir = filepath.Join(root, module)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build in %s: %v\n%s", module, err, b)
		}
		for _, p := range pkgs {
			name := filepath.Base(p)
			bins[name] = filepath.Join(out, name)
		}
	}
	return bins
}

const walkVersion = "v0.0.0-walk"

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Nothing the walk runs may reach the stack: point every client at a
	// closed port, in case a command got as far as connecting.
	cmd.Env = append(os.Environ(), "CONCORD_KAFKA_BROKERS=127.0.0.1:1", "KAFKA_BROKERS=127.0.0.1:1")
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: still running after 20s", filepath.Base(bin), strings.Join(args, " "))
	}
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("%s: %v", bin, err)
	}
	return r
}

var (
	flagLine    = regexp.MustCompile(`^  --([a-z0-9][a-z0-9-]*)( \S+)?$`)
	commandLine = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)  +\S`)
)

// help is what a --help lists: flags (name → the text under it) and
// commands.
type help struct {
	flags    map[string]string
	commands []string
}

func parseHelp(out string) help {
	h := help{flags: map[string]string{}}
	lines := strings.Split(out, "\n")
	section := ""
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "Commands"):
			section = "commands"
			continue
		case strings.HasPrefix(l, "Flags"):
			section = "flags"
			continue
		case l == "":
			section = ""
			continue
		}
		switch section {
		case "commands":
			if m := commandLine.FindStringSubmatch(l); m != nil {
				h.commands = append(h.commands, m[1])
			}
		case "flags":
			if m := flagLine.FindStringSubmatch(l); m != nil {
				text := ""
				if i+1 < len(lines) {
					text = lines[i+1]
				}
				h.flags[m[1]] = text
			}
		}
	}
	return h
}

// TestEveryBinaryAndCommandFollowsTheConventions walks every binary and
// every command its --help lists, recursively.
func TestEveryBinaryAndCommandFollowsTheConventions(t *testing.T) {
	start := time.Now()
	bins := buildAll(t)
	t.Logf("built %d binaries in %s", len(bins), time.Since(start).Round(time.Millisecond))
	names := make([]string, 0, len(bins))
	for n := range bins {
		names = append(names, n)
	}
	sort.Strings(names)
	walked := 0
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			walked += walk(t, bins[name], name, nil)
		})
	}
	t.Logf("walked %d commands of %d binaries in %s", walked, len(bins), time.Since(start).Round(time.Millisecond))
}

func walk(t *testing.T, bin, name string, path []string) int {
	t.Helper()
	at := func(extra ...string) []string { return append(append([]string{}, path...), extra...) }
	where := strings.Join(append([]string{name}, path...), " ")

	r := run(t, bin, at("--help")...)
	if r.code != 0 {
		t.Fatalf("%s --help: exit %d, want 0\n%s%s", where, r.code, r.stdout, r.stderr)
	}
	h := parseHelp(r.stdout)
	if _, ok := h.flags["version"]; !ok {
		t.Errorf("%s --help does not list --version:\n%s", where, r.stdout)
	}
	if _, ok := h.flags["help"]; !ok {
		t.Errorf("%s --help does not list --help:\n%s", where, r.stdout)
	}
	for f, text := range h.flags {
		if f == "version" || f == "help" {
			continue
		}
		if !strings.Contains(text, "["+kit.EnvName(f)) {
			t.Errorf("%s --help: --%s lacks its variable [%s]: %q", where, f, kit.EnvName(f), text)
		}
	}

	r = run(t, bin, at("--version")...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, where+" "+walkVersion+" (commit ") {
		t.Errorf("%s --version: exit %d %q, want 0 and %q", where, r.code, r.stdout, walkVersion)
	}

	r = run(t, bin, at("--no-such-flag-at-all")...)
	if r.code != 2 || !strings.Contains(r.stderr, "no-such-flag-at-all") {
		t.Errorf("%s --no-such-flag-at-all: exit %d %q, want 2 naming the flag", where, r.code, r.stderr)
	}

	if len(h.commands) == 0 {
		// A flag after a positional argument is still a flag: --help
		// there prints the help instead of being taken for an argument.
		r = run(t, bin, at("some-argument", "--help")...)
		if r.code != 0 || !strings.Contains(r.stdout, "--version") {
			t.Errorf("%s some-argument --help: exit %d, want 0 and the help\n%s%s", where, r.code, r.stdout, r.stderr)
		}
		return 1
	}
	r = run(t, bin, at("no-such-command")...)
	if r.code != 2 || !strings.Contains(r.stderr, "no-such-command") {
		t.Errorf("%s no-such-command: exit %d %q, want 2 naming it", where, r.code, r.stderr)
	}
	n := 1
	for _, c := range h.commands {
		n += walk(t, bin, name, at(c))
	}
	return n
}
