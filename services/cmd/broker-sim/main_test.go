package main

import (
	"context"
	"errors"
	"flag"
	"testing"

	"github.com/concordhq/concord/infra/kit"
)

func TestBadFlagValuesAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--fault-5xx-rate=2"},
		{"--fault-return-delay=soon"},
		{"--seed=-1"},
		{"--rate-limit=-3"},
		{"--sse-buffer=0"},
		{"--firm-cash=-5"},
		{"--firm-account-id=firm"},
		{"--api-key=k"},
		{"--no-such-flag"},
		{"--log-level=loud"},
		{"extra"},
	} {
		err := run(t.Context(), args)
		if !errors.As(err, new(kit.UsageError)) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

func TestEnvironmentFallbacksAreValidated(t *testing.T) {
	t.Setenv("CONCORD_FAULT_SSE_DROP_RATE", "lots")
	if err := run(t.Context(), nil); !errors.As(err, new(kit.UsageError)) {
		t.Fatalf("got %v, want a usage error naming the variable", err)
	}
}

func TestHelpIsNotAnError(t *testing.T) {
	if err := run(t.Context(), []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("got %v, want flag.ErrHelp", err)
	}
}

func TestStopsCleanlyWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := run(ctx, []string{"--http-addr=127.0.0.1:0", "--data-dir=" + t.TempDir()}); err != nil {
		t.Fatalf("run: %v", err)
	}
}
