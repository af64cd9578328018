package main

import (
	"context"
	"testing"
	"time"

	"github.com/concordhq/concord/infra/testkit"
)

// The example does what it says against the real stack: one effect for
// one event, none for its redelivery.
func TestRoundTrip(t *testing.T) {
	k := testkit.NewKafka(t)
	url := testkit.NewDatabase(t, testkit.PostgresURL(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Run(ctx, url, k.Config(), testkit.UniqueName(t, "roundtrip")+"."); err != nil {
		t.Fatal(err)
	}
}
