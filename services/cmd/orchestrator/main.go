// Command orchestrator runs the orchestrated checkout saga: it starts a
// saga for each saga.checkout_requested, sends each step's command through
// its outbox, applies the participants' replies, times out silent steps,
// compensates in reverse on failure, and alerts on sagas whose
// compensation was exhausted. `orchestrator reviews` lists and resolves
// those sagas' review entries.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/consumers/idempotent"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/internal/svc"
	"github.com/concordhq/concord/services/orchestrator"
	"github.com/concordhq/concord/services/orchestrator/orchestratorconsumer"
	"github.com/concordhq/concord/services/orchestrator/orchestratorstore"
)

func main() { kit.Main("orchestrator", run) }

func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "reviews" {
		return runReviews(ctx, args[1:])
	}
	p := orchestrator.DefaultPolicy
	var timeout, boMin, boMax, sweepEvery, stuckAfter, stuckEvery *time.Duration
	var attempts, compAttempts, sweepBatch *int
	var webhook *string
	// The handler needs the store, which Setup builds (it needs the ops
	// registry); the runner starts after Setup.
	var handle idempotent.BatchHandler
	return svc.Run(ctx, args, svc.Spec{
		Name: "orchestrator", Summary: "Concord saga orchestrator: the durable orchestrated checkout (reserve_credit → reserve_inventory → create_shipment → capture_payment).\n\n" +
			"  orchestrator [flags]                                 run the orchestrator\n" +
			"  orchestrator reviews list|resolve ID [flags]         review entries of FAILED sagas (see `orchestrator reviews --help`)",
		DatabaseEnv: "ORCHESTRATOR_DATABASE_URL", DefaultOpsAddr: ":9086",
		Topics: orchestratorconsumer.Topics, Types: []contract.Type{contract.TypeSagaCheckoutRequested, contract.TypeSagaStepReplied},
		ProducedTopics: []string{contract.TypePaymentAuthorizeHold.Topic(), contract.TypeInventoryReserveStock.Topic(),
			contract.TypeShippingCreateShipment.Topic(), contract.TypeSagaFinished.Topic()},
		Migrate: orchestratorstore.Migrate,
		BatchHandler: func(ctx context.Context, tx pgx.Tx, evs []idempotent.Event, out outbox.Emitter) error {
			return handle(ctx, tx, evs, out)
		},
		Flags: func(fs *kit.FlagSet) {
			timeout = fs.Duration("step-timeout", "SAGA_STEP_TIMEOUT", p.Timeout, "how long a step's command waits for its reply before it is sent again (or the step fails)")
			attempts = fs.Int("step-attempts", "SAGA_STEP_ATTEMPTS", p.Attempts, "sends of a step's execute command (timeouts and retryable refusals) before the step fails and compensation starts")
			compAttempts = fs.Int("compensation-attempts", "SAGA_COMPENSATION_ATTEMPTS", p.CompensationAttempts,
				"sends of a compensation before it is given up: the step becomes compensation_failed, the saga FAILED, and a review entry and an alert are raised")
			boMin = fs.Duration("retry-backoff-min", "SAGA_RETRY_BACKOFF_MIN", p.BackoffMin, "wait before a refused command is sent again; doubles with each refusal")
			boMax = fs.Duration("retry-backoff-max", "SAGA_RETRY_BACKOFF_MAX", p.BackoffMax, "longest wait between sends of a refused command")
			sweepEvery = fs.Duration("sweep-interval", "SAGA_SWEEP_INTERVAL", 250*time.Millisecond, "how often sagas whose deadline passed (timeouts, retries) are looked for")
			sweepBatch = fs.Int("sweep-batch", "SAGA_SWEEP_BATCH", 100, "sagas one sweep transaction moves at most")
			stuckAfter = fs.Duration("stuck-after", "SAGA_STUCK_AFTER", 5*time.Minute, "a non-terminal saga unchanged this long counts as stuck (concord_saga_stuck, a log line)")
			stuckEvery = fs.Duration("stuck-check-interval", "SAGA_STUCK_CHECK_INTERVAL", 30*time.Second, "how often stuck sagas are looked for")
			webhook = fs.String("alert-webhook-url", "SAGA_ALERT_WEBHOOK_URL", "", "URL a FAILED saga's review entry is POSTed to (JSON), retried until it answers 2xx; the alert is a log line only when empty")
		},
		CheckFlags: func() error {
			p = orchestrator.Policy{Timeout: *timeout, Attempts: *attempts, CompensationAttempts: *compAttempts, BackoffMin: *boMin, BackoffMax: *boMax}
			switch {
			case *sweepEvery <= 0 || *stuckEvery <= 0 || *stuckAfter <= 0:
				return fmt.Errorf("--sweep-interval, --stuck-check-interval and --stuck-after must be positive")
			case *sweepBatch < 1:
				return fmt.Errorf("--sweep-batch %d: must be at least 1", *sweepBatch)
			}
			return orchestrator.Checkout(p).Validate()
		},
		Setup: func(ctx context.Context, env *svc.Env) ([]func(context.Context) error, error) {
			store := &orchestratorstore.Store{Def: orchestrator.Checkout(p), Outbox: env.Outbox, Log: env.Log,
				Metrics: orchestratorstore.NewMetrics(env.Ops.Registry)}
			handle = orchestratorconsumer.BatchHandler(store, orchestratorconsumer.Mux(store))
			alerter := &orchestratorstore.Alerter{Pool: env.Pool, WebhookURL: *webhook, Log: env.Log, Metrics: store.Metrics}
			return []func(context.Context) error{
				func(ctx context.Context) error { return store.RunSweeper(ctx, env.Pool, *sweepEvery, *sweepBatch) },
				func(ctx context.Context) error {
					return store.RunStuckDetector(ctx, env.Pool, *stuckAfter, *stuckEvery)
				},
				alerter.Run,
			}, nil
		},
	})
}
