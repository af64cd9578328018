package reconcilercli

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/kit"
)

func TestHealWindow(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		since, until string
		from, to     time.Time
		bad          bool
	}{
		{since: "72h", from: now.Add(-72 * time.Hour), to: now},
		{since: "2026-11-28T00:00:00Z", until: "2026-11-29T00:00:00Z",
			from: time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), to: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)},
		{since: "2h", until: "1h", from: now.Add(-2 * time.Hour), to: now.Add(-time.Hour)},
		{bad: true},                           // --since missing
		{since: "yesterday", bad: true},       // neither time nor duration
		{since: "1h", until: "2h", bad: true}, // until before since
		{since: "-1h", bad: true},             // a window in the future
	}
	for _, c := range cases {
		from, to, err := window(c.since, c.until, now)
		if c.bad {
			if err == nil {
				t.Errorf("window(%q, %q) = %v..%v, want an error", c.since, c.until, from, to)
			}
			continue
		}
		if err != nil || !from.Equal(c.from) || !to.Equal(c.to) {
			t.Errorf("window(%q, %q) = %v..%v, %v; want %v..%v", c.since, c.until, from, to, err, c.from, c.to)
		}
	}
}

// TestBadUsageIsAUsageError: mistakes on the command line exit 2 with a
// reason before anything is opened.
func TestBadUsageIsAUsageError(t *testing.T) {
	for _, v := range []string{"PAYMENTS_DATABASE_URL", "PROVIDER_API_KEY", "CONCORD_DATABASE_URL", "CONCORD_PROVIDER_API_KEY",
		"CONCORD_FUNDING_DATABASE_URL", "CONCORD_BROKER_URL", "CONCORD_FIRM_ACCOUNT"} {
		t.Setenv(v, "")
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"no command":           Run(ctx, nil, io.Discard),
		"unknown command":      Run(ctx, []string{"reconcile"}, io.Discard),
		"resolve without note": findings(ctx, []string{"resolve", "7"}, io.Discard),
		"resolve without id":   findings(ctx, []string{"resolve"}, io.Discard),
		"show a non-id":        findings(ctx, []string{"show", "abc"}, io.Discard),
		"unknown findings op":  findings(ctx, []string{"delete", "7"}, io.Discard),
		"heal without since":   runCommand(ctx, "heal", nil, io.Discard),
		"status without db":    runCommand(ctx, "status", nil, io.Discard),
		"once without key":     runCommand(ctx, "once", []string{"--database-url", "postgres://x"}, io.Discard),
		"broker heal without since": brokerCommand(ctx, "heal", []string{"--funding-database-url", "postgres://x",
			"--broker-url", "http://x", "--firm-account", "f"}, io.Discard),
		"broker heal without db":   brokerCommand(ctx, "heal", []string{"--since", "1h", "--broker-url", "http://x", "--firm-account", "f"}, io.Discard),
		"broker once without firm": brokerCommand(ctx, "once", []string{"--funding-database-url", "postgres://x", "--broker-url", "http://x"}, io.Discard),
		"broker with no workers": brokerCommand(ctx, "once", []string{"--funding-database-url", "postgres://x", "--broker-url", "http://x",
			"--firm-account", "f", "--workers", "0"}, io.Discard),
		"broker unknown command":      broker(ctx, []string{"reconcile"}, io.Discard),
		"broker resolve without note": brokerFindings(ctx, "resolve", []string{"7", "--funding-database-url", "postgres://x"}, io.Discard),
		"broker resolve a non-id":     brokerFindings(ctx, "resolve", []string{"x", "--note", "n"}, io.Discard),
		"broker findings without db":  brokerFindings(ctx, "findings", nil, io.Discard),
	} {
		if !errors.As(err, new(kit.UsageError)) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
}
