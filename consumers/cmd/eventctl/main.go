// Command eventctl tails and produces Concord's events with the schema
// catalog; see package eventctl.
package main

import (
	"context"
	"os"

	"github.com/concordhq/concord/consumers/eventctl"
	"github.com/concordhq/concord/infra/kit"
)

func main() {
	kit.Main("eventctl", func(ctx context.Context, args []string) error {
		return eventctl.Run(ctx, args, os.Stdout, os.Stderr)
	})
}
