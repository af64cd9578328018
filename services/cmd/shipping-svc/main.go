// Command shipping-svc is the orchestrated saga's shipping participant: it
// takes shipping.create_shipment and shipping.cancel_shipment from
// shipping-commands, books and voids shipments at the carrier (carrier-sim
// in development) under the command's idempotency key, and answers each
// command with saga.step_replied on saga-replies.
package main

import (
	"context"
	"time"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/services/internal/svc"
	"github.com/concordhq/concord/services/shipping/shipper"
	"github.com/concordhq/concord/services/shipping/shippingcarrier"
	"github.com/concordhq/concord/services/shipping/shippingconsumer"
	"github.com/concordhq/concord/services/shipping/shippingstore"
)

func main() { kit.Main("shipping-svc", run) }

func run(ctx context.Context, args []string) error {
	var carrierURL, apiKey *string
	var timeout, lease, budget, maxRetry *time.Duration
	var concurrency *int
	var mux idempotent.Mux
	return svc.Run(ctx, args, svc.Spec{
		Name: "shipping-svc", Summary: "Concord shipping service: books and cancels shipments at the carrier for the orchestrated saga.",
		DatabaseEnv: "SHIPPING_DATABASE_URL", DefaultOpsAddr: ":9085",
		Topics: shippingconsumer.Topics, Types: shippingconsumer.Types,
		// The handlers are registered in Setup, once the flags are parsed.
		BatchHandler: shippingconsumer.BatchHandler(&mux), Migrate: shippingstore.Migrate,
		Flags: func(fs *kit.FlagSet) {
			carrierURL = fs.String("carrier-url", "CARRIER_URL", "", "carrier API base URL (carrier-sim: http://127.0.0.1:12112)")
			apiKey = fs.String("carrier-api-key", "CARRIER_API_KEY", "", "bearer token for the carrier API (empty sends none)")
			timeout = fs.Duration("carrier-timeout", "CARRIER_TIMEOUT", 5*time.Second,
				"bound of one carrier call; past it the answer counts as lost and the key is looked up before any new call")
			lease = fs.Duration("carrier-lease", "CARRIER_LEASE", 15*time.Second,
				"how long a claimed shipment is left to one attempt before another may take it (must exceed --carrier-timeout)")
			budget = fs.Duration("step-budget", "STEP_BUDGET", 30*time.Second,
				"how long a command may spend on carrier attempts before it is answered failed (retryable, reason carrier_unavailable)")
			maxRetry = fs.Duration("carrier-max-backoff", "CARRIER_MAX_BACKOFF", 5*time.Second,
				"longest wait between attempts the carrier did not answer (starts at 200ms, doubles)")
			concurrency = fs.Int("carrier-concurrency", "CARRIER_CONCURRENCY", 16, "carrier calls in flight")
		},
		Setup: func(ctx context.Context, env *svc.Env) ([]func(context.Context) error, error) {
			switch {
			case *carrierURL == "":
				return nil, kit.Usagef("--carrier-url is required")
			case *lease <= *timeout:
				return nil, kit.Usagef("--carrier-lease %s must exceed --carrier-timeout %s", *lease, *timeout)
			case *budget <= 0 || *timeout <= 0 || *maxRetry <= 0:
				return nil, kit.Usagef("--step-budget, --carrier-timeout and --carrier-max-backoff must be positive")
			case *concurrency < 1:
				return nil, kit.Usagef("--carrier-concurrency %d: must be at least 1", *concurrency)
			}
			cl, err := shippingcarrier.New(shippingcarrier.Config{BaseURL: *carrierURL, APIKey: *apiKey, Timeout: *timeout})
			if err != nil {
				return nil, kit.Usagef("--carrier-url: %v", err)
			}
			sh, err := shipper.New(shipper.Config{Pool: env.Pool, Outbox: env.Outbox, Carrier: cl, Log: env.Log,
				Concurrency: *concurrency, Lease: *lease, MaxRetry: *maxRetry, Registerer: env.Ops.Registry})
			if err != nil {
				return nil, err
			}
			shippingconsumer.Register(&mux, *budget, time.Now)
			// A committed consumer batch may have stored a command to carry out.
			env.AfterConsumerCommit = func(string) { sh.Nudge() }
			return []func(context.Context) error{sh.Run}, nil
		},
	})
}
