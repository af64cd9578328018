package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/shipping/carriersim"
)

func TestBadFlagValuesAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--fault-5xx-rate=2"},
		{"--fault-5xx-next=-1"},
		{"--fault-hang-next=many"},
		{"--fault-latency=soon"},
		{"--seed=-1"},
		{"--no-such-flag"},
		{"--log-level=loud"},
	} {
		if err := run(t.Context(), args); !errors.As(err, new(kit.UsageError)) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

func TestEnvironmentFallbacksAreValidated(t *testing.T) {
	t.Setenv("CARRIERSIM_FAULT_DECLINE_RATE", "often")
	if err := run(t.Context(), nil); !errors.As(err, new(kit.UsageError)) {
		t.Fatalf("got %v, want a usage error naming the variable", err)
	}
}

func TestHelpListsEveryKnob(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	err = run(t.Context(), []string{"--help"})
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("got %v, want flag.ErrHelp", err)
	}
	for _, k := range carriersim.Knobs() {
		if !strings.Contains(string(out), "-fault-"+k.Name) {
			t.Errorf("--help does not list --fault-%s", k.Name)
		}
	}
}

func TestStopsCleanlyWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := run(ctx, []string{"--http-addr=127.0.0.1:0", "--admin"}); err != nil {
		t.Fatalf("run: %v", err)
	}
}
