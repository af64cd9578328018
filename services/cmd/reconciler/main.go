// Command reconciler compares the payments database with the payment
// provider, records every drift once as a finding, and emits repair commands
// for the drifts that are safe to heal (payment-svc applies them).
//
//	reconciler run                       scan in a loop (plus a scheduled heal), serve /metrics
//	reconciler once                      finish the current cycle and print its summary
//	reconciler status                    lag, cycles, open findings by kind
//	reconciler heal --since T --until T  re-pull provider events for a window
//	reconciler findings list|show ID|resolve ID --note "…"
//
// The commands live in services/reconciler/reconcilercli.
package main

import (
	"context"
	"os"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/reconciler/reconcilercli"
)

func main() {
	kit.Main("reconciler", func(ctx context.Context, args []string) error {
		return reconcilercli.Run(ctx, args, os.Stdout)
	})
}
