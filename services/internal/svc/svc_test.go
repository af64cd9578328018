package svc_test

import (
	"errors"
	"testing"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/internal/svc"
)

// Bad values are refused before anything connects, naming the flag.
func TestBadFlagValuesAreUsageErrors(t *testing.T) {
	spec := svc.Spec{Name: "test-svc", Summary: "test", DatabaseEnv: "TEST_SVC_DATABASE_URL"}
	for _, args := range [][]string{
		{},
		{"--database-url=postgres://x", "--fetch-max-wait=1ms"},
		{"--database-url=postgres://x", "--fetch-min-bytes=0"},
		{"--database-url=postgres://x", "--consumer-slots=0"},
		{"--database-url=postgres://x", "--log-level=loud"},
		{"--no-such-flag"},
	} {
		if err := svc.Run(t.Context(), args, spec); !errors.As(err, new(kit.UsageError)) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

// A service's own flag check runs before anything connects; its refusal is
// a usage error.
func TestCheckFlagsRefusalIsAUsageErrorBeforeConnecting(t *testing.T) {
	checked := false
	spec := svc.Spec{Name: "test-svc", Summary: "test", DatabaseEnv: "TEST_SVC_DATABASE_URL",
		CheckFlags: func() error { checked = true; return errors.New("--default-flow \"x\": no such flow") }}
	// The URL points nowhere: reaching the database would be another error.
	err := svc.Run(t.Context(), []string{"--database-url=postgres://nobody@127.0.0.1:1/none"}, spec)
	if !checked || !errors.As(err, new(kit.UsageError)) {
		t.Fatalf("checked %v, err %v; want the check's usage error", checked, err)
	}
}
