package kit_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/kit"
)

func TestFlagsFallBackToEnvironmentAndFlagsWin(t *testing.T) {
	t.Setenv("CONCORD_BROKERS", "env:9092")
	t.Setenv("CONCORD_BATCH", "7")
	fs := kit.NewFlagSet("x", "test")
	fs.SetOutput(io.Discard)
	brokers := fs.String("brokers", "", "default:9092", "")
	batch := fs.Int("batch", "", 1, "")
	wait := fs.Duration("wait", "", time.Second, "")
	if err := fs.Parse([]string{"--batch", "9"}); err != nil {
		t.Fatal(err)
	}
	if *brokers != "env:9092" || *batch != 9 || *wait != time.Second {
		t.Fatalf("brokers=%q batch=%d wait=%s", *brokers, *batch, *wait)
	}
}

// Given tells a flag left at its default from one given its default's
// value, on the command line or through its variable.
func TestGivenFlagsAreTheOnesSetOnTheCommandLineOrInTheEnvironment(t *testing.T) {
	t.Setenv("CONCORD_BATCH", "1")
	fs := kit.NewFlagSet("x", "test")
	fs.SetOutput(io.Discard)
	fs.Int("batch", "", 1, "")
	fs.Duration("wait", "", 0, "")
	fs.Duration("linger", "", 0, "")
	if err := fs.Parse([]string{"--wait", "0"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"batch": true, "wait": true, "linger": false} {
		if got := fs.Given(name); got != want {
			t.Errorf("Given(%q) = %t, want %t", name, got, want)
		}
	}
}

// An older variable name still works, with a warning naming the new one;
// the new name wins when both are set.
func TestLegacyEnvironmentNamesWarnAndLose(t *testing.T) {
	t.Setenv("TEST_OLD_ADDR", "old:1")
	fs := kit.NewFlagSet("x", "test")
	var warn strings.Builder
	fs.SetWarnings(&warn)
	addr := fs.String("listen-addr", "TEST_OLD_ADDR", ":1", "")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if *addr != "old:1" || !strings.Contains(warn.String(), "TEST_OLD_ADDR is deprecated, use CONCORD_LISTEN_ADDR") {
		t.Fatalf("addr=%q warning %q", *addr, warn.String())
	}
	if n := strings.Count(warn.String(), "\n"); n != 1 {
		t.Fatalf("%d warning lines, want 1: %q", n, warn.String())
	}

	t.Setenv("CONCORD_LISTEN_ADDR", "new:2")
	fs = kit.NewFlagSet("x", "test")
	warn.Reset()
	fs.SetWarnings(&warn)
	addr = fs.String("listen-addr", "TEST_OLD_ADDR", ":1", "")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if *addr != "new:2" || !strings.Contains(warn.String(), "TEST_OLD_ADDR is deprecated and ignored") {
		t.Fatalf("addr=%q warning %q, want the new name to win", *addr, warn.String())
	}
}

// Flags may follow positional arguments; "--" ends the flags; StopAtArg
// leaves everything after the verb to the verb.
func TestFlagsBeforeOrAfterArguments(t *testing.T) {
	fs := kit.NewFlagSet("x", "test")
	mode := fs.String("mode", "", "BACKWARD", "")
	n := fs.Int("n", "", 0, "")
	if err := fs.Parse([]string{"old.json", "--mode", "FULL", "new.json", "-n", "3", "--", "--not-a-flag"}); err != nil {
		t.Fatal(err)
	}
	if *mode != "FULL" || *n != 3 || strings.Join(fs.Args(), " ") != "old.json new.json --not-a-flag" {
		t.Fatalf("mode=%q n=%d args=%q", *mode, *n, fs.Args())
	}

	fs = kit.NewFlagSet("x", "test")
	fs.StopAtArg = true
	fs.Bool("v", "", false, "")
	if err := fs.Parse([]string{"-v", "outbox", "retry", "--reason", "r"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(fs.Args(), " ") != "outbox retry --reason r" {
		t.Fatalf("args=%q, want everything from the verb on", fs.Args())
	}
}

// A deprecated flag name sets the new flag, warns, and is not listed.
func TestFlagAliasIsHiddenAndWarns(t *testing.T) {
	fs := kit.NewFlagSet("x", "test")
	var out, warn strings.Builder
	fs.SetOutput(&out)
	fs.SetWarnings(&warn)
	addr := fs.String("http-addr", "", ":1", "listen address")
	fs.Alias("addr", "http-addr")
	if err := fs.Parse([]string{"--addr", ":2"}); err != nil {
		t.Fatal(err)
	}
	if *addr != ":2" || !strings.Contains(warn.String(), "--addr is deprecated, use --http-addr") {
		t.Fatalf("addr=%q warning %q", *addr, warn.String())
	}
	fs.PrintHelp()
	if strings.Contains(out.String(), "--addr ") || !strings.Contains(out.String(), "--http-addr") {
		t.Fatalf("help:\n%s", out.String())
	}
}

// --help lists every flag the set defines with its variable, and the
// commands added.
func TestHelpListsEveryFlagWithItsVariable(t *testing.T) {
	fs := kit.NewFlagSet("x", "test")
	var out strings.Builder
	fs.SetOutput(&out)
	kit.AddKafkaFlags(fs)
	kit.AddLogFlags(fs)
	var raw string
	fs.StringVar(&raw, "plain-stdlib", "", "defined through the embedded flag.FlagSet")
	fs.AddCommand("outbox", "look at parked rows")
	if err := fs.Parse([]string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("got %v, want flag.ErrHelp", err)
	}
	fs.VisitAll(func(f *flag.Flag) {
		want := "  --" + f.Name
		if f.Name != "version" {
			want = "[" + kit.EnvName(f.Name)
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	})
	if !strings.Contains(out.String(), "\n  outbox  look at parked rows\n") {
		t.Errorf("--help lacks the command:\n%s", out.String())
	}
}

func TestVersionPrintsTheBuild(t *testing.T) {
	fs := kit.NewFlagSet("x", "test")
	var out strings.Builder
	fs.SetOutput(&out)
	if err := fs.Parse([]string{"arg", "--version"}); !errors.Is(err, kit.ErrVersion) {
		t.Fatalf("got %v, want ErrVersion", err)
	}
	b := kit.BuildInfo()
	if !strings.HasPrefix(out.String(), "x "+b.Version+" (commit "+b.Revision) || !strings.Contains(out.String(), b.GoVersion) {
		t.Fatalf("--version printed %q", out.String())
	}
}

// Every binary exits 2 on a bad flag and 0 on --help, without wrapping
// Parse's error itself.
func TestParseErrorsAreUsageErrorsAndHelpIsNot(t *testing.T) {
	fs := kit.NewFlagSet("x", "test")
	fs.SetOutput(io.Discard)
	fs.Int("batch", "", 1, "")
	if err := fs.Parse([]string{"--no-such-flag"}); !errors.As(err, new(kit.UsageError)) {
		t.Fatalf("unknown flag: %v, want a usage error", err)
	}
	if err := fs.Parse([]string{"--batch", "many"}); !errors.As(err, new(kit.UsageError)) {
		t.Fatalf("bad value: %v, want a usage error", err)
	}
	if err := fs.Parse([]string{"--help"}); !errors.Is(err, flag.ErrHelp) || errors.As(err, new(kit.UsageError)) {
		t.Fatalf("--help: %v, want flag.ErrHelp alone", err)
	}
}

func TestKafkaConfigRejectsUnknownSASLMechanism(t *testing.T) {
	_, err := kit.KafkaConfig{Brokers: []string{"b:1"}, SASLMechanism: "GSSAPI"}.Opts()
	if err == nil || !strings.Contains(err.Error(), "GSSAPI") {
		t.Fatalf("got %v", err)
	}
	if _, err := (kit.KafkaConfig{}).Opts(); err == nil {
		t.Fatal("empty broker list accepted")
	}
	opts, err := kit.KafkaConfig{Brokers: kit.SplitBrokers(" a:1, ,b:2 "), SASLMechanism: "SCRAM-SHA-512", TLS: true}.Opts()
	if err != nil || len(opts) != 3 {
		t.Fatalf("opts %d err %v, want seeds+TLS+SASL", len(opts), err)
	}
}

func TestOpsServerHealthReadinessAndMetrics(t *testing.T) {
	ready := errors.New("database down")
	srv, err := kit.NewOpsServer("127.0.0.1:0", func(context.Context) error { return ready })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, discardLogger(), time.Second) }()
	base := "http://" + srv.Addr()
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("/healthz %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "database down") {
		t.Fatalf("/readyz %d %q, want 503 naming the cause", code, body)
	}
	ready = nil
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("/readyz %d after recovery", code)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") ||
		!strings.Contains(body, `concord_build_info{goversion="`+runtime.Version()+`"`) {
		t.Fatalf("/metrics %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
