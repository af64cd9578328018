// Command loadgen places orders on order-svc at a fixed rate, for demos
// and benchmarks, and prints how many were accepted.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/internal/loadgen"
)

func main() { kit.Main("loadgen", run) }

func run(ctx context.Context, args []string) error {
	fs := kit.NewFlagSet("loadgen", "Concord loadgen: place orders on order-svc at a fixed rate.")
	var c loadgen.Config
	fs.StringVar(&c.OrderURL, "order-url", "http://127.0.0.1:8081", "base URL of order-svc")
	fs.IntVar(&c.Orders, "orders", 500, "orders to place")
	fs.Float64Var(&c.Rate, "rate", 100, "orders per second offered (0: as fast as --concurrency allows)")
	fs.IntVar(&c.Concurrency, "concurrency", 32, "requests in flight")
	fs.IntVar(&c.SKUs, "skus", 50, "SKUs (SKU-001 …) to spread orders over")
	fs.Float64Var(&c.DeclineShare, "decline-share", 0, "share of orders paid with a card the provider declines")
	seed := fs.Int("seed", "LOADGEN_SEED", 1, "seed of the order mix")
	key := fs.String("api-key", "", "", "order API key with the scope orders:write (see `order-svc keys create`)")
	keyFile := fs.String("api-key-file", "", "", "file holding the order API key (order-svc --api-key-file writes one for local runs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return kit.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if c.Orders < 1 || c.SKUs < 1 {
		return kit.Usagef("--orders and --skus must be positive")
	}
	c.Seed = uint64(*seed)
	switch {
	case *key != "" && *keyFile != "":
		return kit.Usagef("--api-key and --api-key-file: give one")
	case *keyFile != "":
		b, err := os.ReadFile(*keyFile)
		if err != nil {
			return kit.Usagef("--api-key-file: %v", err)
		}
		c.APIKey = strings.TrimSpace(string(b))
	default:
		c.APIKey = *key
	}
	if c.APIKey == "" {
		return kit.Usagef("the order API needs a key: --api-key or --api-key-file")
	}
	res, err := loadgen.Run(ctx, c)
	if err != nil {
		return err
	}
	fmt.Printf("placed %d orders in %s (%.0f/s), %d refused\n", len(res.Created), res.Duration, float64(len(res.Created))/res.Duration.Seconds(), res.Failed)
	if res.Failed > 0 {
		return fmt.Errorf("%d orders were refused", res.Failed)
	}
	return nil
}
