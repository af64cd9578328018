// Command payment-svc is the saga's payment service: it stores a payment
// intent for every reservation, charges it through the provider gateway
// (stripe-go, pointed at Stripe or provider-sim), takes the provider's
// webhooks, refunds payments whose order was cancelled (unless order-svc
// confirmed it), refuses reservations that contradict their order, and applies the
// reconciler's repair commands through the same canonical writer. For the
// orchestrated checkout it places, captures and releases authorization
// holds on the orchestrator's commands and replies saga.step_replied.
package main

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/internal/contradiction"
	"github.com/concordhq/concord/services/internal/svc"
	"github.com/concordhq/concord/services/payment/charger"
	"github.com/concordhq/concord/services/payment/holder"
	"github.com/concordhq/concord/services/payment/paymentapi"
	"github.com/concordhq/concord/services/payment/paymentconsumer"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
	"github.com/concordhq/concord/services/reconciler/repair"
)

func main() { kit.Main("payment-svc", run) }

func run(ctx context.Context, args []string) error {
	var apiKey, baseURL, secret *string
	var timeout, recheck, lease, unknownWait *time.Duration
	var concurrency *int
	var mux idempotent.Mux
	// Set from --unknown-order-wait in Setup, before the consumer starts.
	checks := &paymentconsumer.Checks{}
	return svc.Run(ctx, args, svc.Spec{
		Name: "payment-svc", Summary: "Concord payment service: charges, webhooks, refunds; saga participant.",
		DatabaseEnv: "PAYMENTS_DATABASE_URL", DefaultAddr: ":8083", DefaultOpsAddr: ":9083",
		// The hold commands share payment-commands with the repairs.
		Topics: topics(),
		Types:  append(append(append([]contract.Type{}, paymentconsumer.Types...), repair.Types...), paymentconsumer.HoldTypes...),
		// The handlers are registered in Setup, which has the service's
		// outbox writer, before the consumer starts.
		BatchHandler: paymentconsumer.BatchHandler(&mux, checks), Migrate: migrate,
		// Every provider answer (up to --provider-concurrency at once) and
		// every webhook records itself in a transaction of its own; with
		// the default 16 they queued for connections behind each other.
		DBMaxConns: 32,
		Flags: func(fs *kit.FlagSet) {
			apiKey = fs.String("provider-api-key", "PROVIDER_API_KEY", "", "provider secret key (sk_test_…)")
			baseURL = fs.String("provider-url", "PROVIDER_URL", "", "provider API base URL (empty: Stripe itself)")
			secret = fs.String("webhook-secret", "WEBHOOK_SECRET", "", "secret that signs the provider's webhooks (whsec_…)")
			timeout = fs.Duration("provider-timeout", "PROVIDER_TIMEOUT", 5*time.Second, "bound of one provider call")
			recheck = fs.Duration("recheck-pending-after", "RECHECK_PENDING_AFTER", 10*time.Second,
				"read a payment the provider left processing after this long if no webhook settled it (0: leave it to webhooks and the reconciler)")
			lease = fs.Duration("charge-lease", "CHARGE_LEASE", 15*time.Second,
				"how long a claimed payment or hold command is left to one attempt (must exceed --provider-timeout)")
			concurrency = fs.Int("provider-concurrency", "PROVIDER_CONCURRENCY", 64,
				"provider calls in flight (each waits out the provider's answer, so the charge rate is about this divided by the provider's latency)")
			unknownWait = fs.Duration("unknown-order-wait", "", paymentconsumer.DefaultUnknownOrderWait,
				"how long a reservation waits for its order.created before it is refused as unknown_order (0: refuse at once)")
		},
		Setup: func(ctx context.Context, env *svc.Env) ([]func(context.Context) error, error) {
			// The saga's events plus the reconciler's repair commands,
			// which resolve their findings in the consumer's transaction.
			checks.UnknownOrderWait = *unknownWait
			paymentconsumer.Register(&mux, checks)
			paymentconsumer.RegisterHolds(&mux)
			repair.Register(&mux, env.Outbox)
			if err := contradiction.RegisterMetrics(env.Ops.Registry); err != nil {
				return nil, err
			}
			if err := kit.Require("provider-api-key", *apiKey, "webhook-secret", *secret); err != nil {
				return nil, kit.UsageError{Err: err}
			}
			gw, err := paymentprovider.New(paymentprovider.Config{APIKey: *apiKey, BaseURL: *baseURL, Timeout: *timeout, Connections: *concurrency})
			if err != nil {
				return nil, err
			}
			ch, err := charger.New(charger.Config{Pool: env.Pool, Outbox: env.Outbox, Gateway: gw, Log: env.Log, Concurrency: *concurrency,
				Lease: *lease, RecheckAfter: *recheck, Registerer: env.Ops.Registry})
			if err != nil {
				return nil, err
			}
			wh, err := paymentapi.NewWebhook(env.Pool, env.Outbox, *secret, env.Log, env.Ops.Registry)
			if err != nil {
				return nil, err
			}
			hl, err := holder.New(holder.Config{Pool: env.Pool, Outbox: env.Outbox, Gateway: gw, Log: env.Log, Concurrency: *concurrency,
				Lease: *lease, Registerer: env.Ops.Registry})
			if err != nil {
				return nil, err
			}
			// A webhook that moved a payment may unblock a refund; one that
			// moved a hold may unblock a command waiting for it.
			wh.AfterApply = func() { ch.Nudge(); hl.Nudge() }
			// A committed consumer batch may have stored a payment to
			// charge or a cancellation to refund; one of payment-commands
			// a hold command, or a repair that leaves a refund due.
			env.AfterConsumerCommit = func(topic string) {
				ch.Nudge()
				if topic == paymentconsumer.HoldTopic {
					hl.Nudge()
				}
			}
			wh.Register(env.API)
			return []func(context.Context) error{ch.Run, hl.Run, paymentconsumer.SweepUnknownOrders(env.Pool, checks, env.Log)}, nil
		},
	})
}

// topics are the consumed topics, each once.
func topics() []string {
	ts := append(append([]string{}, paymentconsumer.Topics...), repair.Topic, paymentconsumer.HoldTopic)
	slices.Sort(ts)
	return slices.Compact(ts)
}

// migrate applies the payments schema, then the reconciler's tables: the
// repair handler resolves findings, and those reference payments.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	if err := paymentstore.Migrate(ctx, pool); err != nil {
		return err
	}
	return reconcilerstore.Migrate(ctx, pool)
}
