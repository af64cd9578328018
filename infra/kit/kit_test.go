package kit_test

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/kit"
)

func TestFlagsFallBackToEnvironmentAndFlagsWin(t *testing.T) {
	t.Setenv("TEST_BROKERS", "env:9092")
	t.Setenv("TEST_BATCH", "7")
	fs := kit.NewFlagSet("x", "test")
	fs.SetOutput(io.Discard)
	brokers := fs.String("brokers", "TEST_BROKERS", "default:9092", "")
	batch := fs.Int("batch", "TEST_BATCH", 1, "")
	wait := fs.Duration("wait", "TEST_WAIT_UNSET", time.Second, "")
	if err := fs.Parse([]string{"--batch", "9"}); err != nil {
		t.Fatal(err)
	}
	if *brokers != "env:9092" || *batch != 9 || *wait != time.Second {
		t.Fatalf("brokers=%q batch=%d wait=%s", *brokers, *batch, *wait)
	}
}

func TestMalformedEnvironmentValueIsNamed(t *testing.T) {
	t.Setenv("TEST_BATCH", "many")
	fs := kit.NewFlagSet("x", "test")
	fs.SetOutput(io.Discard)
	fs.Int("batch", "TEST_BATCH", 1, "")
	err := fs.Parse(nil)
	if err == nil || !strings.Contains(err.Error(), "TEST_BATCH") || !errors.As(err, new(kit.UsageError)) {
		t.Fatalf("got %v, want a usage error naming TEST_BATCH", err)
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

func TestHelpListsEnvironmentVariables(t *testing.T) {
	fs := kit.NewFlagSet("relay", "Publishes the outbox.")
	var out strings.Builder
	fs.SetOutput(&out)
	kit.AddKafkaFlags(fs)
	if err := fs.Parse([]string{"--help"}); !errors.Is(err, flagErrHelp()) {
		t.Fatalf("got %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Publishes the outbox.", "-kafka-brokers", "[KAFKA_BROKERS]", "[KAFKA_SASL_MECHANISM]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
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
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
