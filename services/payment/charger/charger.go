// Package charger is the payment service's worker that talks to the
// provider. It never calls the provider for a payment whose intent row is
// not committed: it takes due rows from the payments table (ClaimCharges),
// calls create-and-confirm with the row's idempotency key (or reads the
// provider payment when its id is known), and records the outcome through
// the canonical writer. A payment the provider leaves processing, or a call
// that timed out or got a 5xx, stays pending and is tried again later with
// the same key, so the provider charges at most once. It also refunds paid
// payments whose order was cancelled.
package charger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/infra/backoff"
	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/wake"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

// Gateway is the part of the provider gateway the charger uses.
type Gateway interface {
	CreateAndConfirm(ctx context.Context, in paymentprovider.Intent) (paymentprovider.Payment, error)
	Get(ctx context.Context, providerID string) (paymentprovider.Payment, error)
	Refund(ctx context.Context, providerID, idemKey string) (paymentprovider.Refund, error)
}

// DefaultPollInterval is Config.PollInterval's default.
const DefaultPollInterval = time.Second

// firstRetry is the wait after the first attempt the provider did not
// answer; it doubles per attempt up to Config.MaxBackoff.
const firstRetry = 200 * time.Millisecond

// Config configures a Charger; zero values take the defaults named.
type Config struct {
	Pool *pgxpool.Pool
	// Outbox routes the events of the transitions the charger records
	// (the service's topic prefix).
	Outbox  outbox.Writer
	Gateway Gateway
	Log     *slog.Logger
	// Concurrency bounds provider calls in flight (default 16).
	Concurrency int
	// PollInterval is how often due payments are looked for when nothing
	// wakes the worker (default 1s). Work is found at once when it is
	// committed: the service calls Nudge after its consumer commits (a new
	// payment, a cancelled order) and after a webhook moved a payment, and
	// a retry this worker schedules wakes it when due. The poll finds what
	// no wake-up announced (a lost nudge, an expired lease, another
	// instance's retry) this late at most.
	PollInterval time.Duration
	// Lease is how long a claimed payment is left to this worker before
	// another attempt may take it; it must exceed a provider call's
	// timeout (default 15s).
	Lease time.Duration
	// RecheckAfter is how long a payment the provider reported as
	// processing waits for its webhook before the charger reads it from
	// the provider itself. Zero leaves it to webhooks and the reconciler.
	RecheckAfter time.Duration
	// MaxBackoff caps the wait between attempts after the provider did not
	// answer (default 10s; it starts at 200ms and doubles).
	MaxBackoff time.Duration
	// Registerer receives the charger's metrics when set.
	Registerer prometheus.Registerer
}

// Charger is the worker; Run it once.
type Charger struct {
	cfg   Config
	calls *prometheus.CounterVec
	wake  *wake.Signal
}

// New checks cfg and returns a Charger.
func New(cfg Config) (*Charger, error) {
	if cfg.Pool == nil || cfg.Gateway == nil {
		return nil, errors.New("charger: Pool and Gateway are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	c := &Charger{cfg: cfg, wake: wake.New(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_payment_provider_calls_total",
			Help: "Provider calls by kind (charge, get, refund) and outcome."}, []string{"kind", "outcome"})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(c.calls); err != nil {
			return nil, fmt.Errorf("charger metrics: %w", err)
		}
	}
	return c, nil
}

// Nudge makes the worker look for due work now instead of at its next poll.
func (c *Charger) Nudge() { c.wake.Now() }

// Run works until ctx is done, then lets the calls in flight finish and
// record their outcome (their own deadline bounds them) before returning.
//
// Calls run in Concurrency slots, and Run claims due work for the slots as
// they free up. It used to claim a round, run it and wait for the round's
// slowest call before claiming again: one slow provider answer idled the
// other slots while payments queued behind it.
func (c *Charger) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	// Outcomes are recorded even when ctx is cancelled mid-call: a charge
	// the provider made must not be forgotten because we are shutting down.
	wctx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, c.cfg.Concurrency) // one per call in flight
	freed := make(chan struct{}, 1)
	// A freed slot alone does not trigger a claim (two queries) until a
	// quarter of the slots are free, so a busy charger claims in groups;
	// and only when the last claim filled every free slot: otherwise it
	// took all that was due, and what becomes due later wakes the worker.
	refill := max(1, c.cfg.Concurrency/4)
	full := false
	for {
		// Only this loop fills slots, so free can only grow until it does.
		if free := cap(slots) - len(slots); free > 0 {
			charges, refunds, err := c.claim(ctx, free)
			if err != nil && ctx.Err() == nil {
				c.cfg.Log.Warn("charger pass failed", "err", err)
			}
			full = len(charges)+len(refunds) == free
			for _, p := range charges {
				c.start(wctx, &wg, slots, freed, p, c.charge)
			}
			for _, p := range refunds {
				c.start(wctx, &wg, slots, freed, p, c.refund)
			}
		}
		for woken := false; !woken; {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				woken = true
			case <-c.wake.C():
				woken = true
			case <-freed:
				woken = full && cap(slots)-len(slots) >= refill
			}
		}
	}
}

// start runs f for p in a slot; the caller has checked one is free.
func (c *Charger) start(ctx context.Context, wg *sync.WaitGroup, slots, freed chan struct{}, p paymentstore.Payment,
	f func(context.Context, paymentstore.Payment) error) {
	slots <- struct{}{}
	wg.Add(1)
	go func() {
		defer func() {
			<-slots
			select {
			case freed <- struct{}{}:
			default:
			}
			wg.Done()
		}()
		// The attempt's span holds the provider call and the event its
		// answer appends, and its lines carry the order's correlation id.
		// It is a child of the span that created the payment, so the
		// attempt is part of the order's trace.
		ctx, opts := kit.ContinueTrace(kit.WithCorrelationID(ctx, p.OrderID), p.Traceparent)
		ctx, span := tracer.Start(ctx, "payment attempt", append(opts,
			trace.WithAttributes(attribute.Int64("concord.payment_id", p.ID), attribute.String("concord.correlation_id", p.OrderID)))...)
		defer span.End()
		if err := f(ctx, p); err != nil {
			span.SetStatus(codes.Error, err.Error())
			c.cfg.Log.WarnContext(ctx, "payment attempt", "payment_id", p.ID, "order_id", p.OrderID, "err", err)
		}
	}()
}

// tracer follows the global tracer provider (see kit.StartTracing).
var tracer = otel.Tracer("github.com/concordhq/concord/services/payment/charger")

// claim takes up to limit due payments: charges first, then refunds.
func (c *Charger) claim(ctx context.Context, limit int) (charges, refunds []paymentstore.Payment, err error) {
	charges, err = paymentstore.ClaimCharges(ctx, c.cfg.Pool, limit, c.cfg.Lease)
	if err != nil {
		return nil, nil, err
	}
	if limit -= len(charges); limit > 0 {
		refunds, err = paymentstore.ClaimRefunds(ctx, c.cfg.Pool, limit, c.cfg.Lease)
	}
	return charges, refunds, err
}

// Outcome maps the gateway's status to the payment service's outcome.
func Outcome(s paymentprovider.Status) payment.Outcome {
	switch s {
	case paymentprovider.StatusSucceeded:
		return payment.OutcomeSucceeded
	case paymentprovider.StatusDeclined, paymentprovider.StatusCanceled:
		return payment.OutcomeDeclined
	case paymentprovider.StatusRefunded:
		return payment.OutcomeRefunded
	case paymentprovider.StatusPending, paymentprovider.StatusProcessing:
		return payment.OutcomePending
	}
	return payment.OutcomeUnknown
}

func (c *Charger) charge(ctx context.Context, p paymentstore.Payment) error {
	var (
		res  paymentprovider.Payment
		err  error
		kind = "charge"
	)
	if p.ProviderPaymentID == "" {
		res, err = c.cfg.Gateway.CreateAndConfirm(ctx, paymentprovider.Intent{
			IdempotencyKey: p.IdempotencyKey, Amount: p.Amount, Currency: p.Currency, PaymentMethod: p.PaymentMethod,
			Description: "order " + p.OrderID,
			Metadata:    map[string]string{"order_id": p.OrderID, "payment_id": strconv.FormatInt(p.ID, 10)},
		})
	} else {
		kind = "get"
		res, err = c.cfg.Gateway.Get(ctx, p.ProviderPaymentID)
	}
	switch {
	case errors.Is(err, paymentprovider.ErrUnavailable), errors.Is(err, paymentprovider.ErrNotFound):
		// No answer: the charge may or may not exist. Same key next time.
		c.calls.WithLabelValues(kind, "unavailable").Inc()
		return c.retryAt(ctx, p, time.Now().Add(backoff.Exponential(p.Attempts, firstRetry, c.cfg.MaxBackoff)), err.Error())
	case errors.Is(err, paymentprovider.ErrInvalidRequest):
		// The provider refused the request itself; nothing was charged.
		c.calls.WithLabelValues(kind, "refused").Inc()
		return c.record(ctx, p, paymentprovider.Payment{Status: paymentprovider.StatusDeclined, DeclineCode: "provider_refused"}, "charge")
	case err != nil:
		// An idempotency conflict is a bug in key derivation; park the
		// payment for an operator rather than guess.
		c.calls.WithLabelValues(kind, "error").Inc()
		return paymentstore.RetryChargeAt(ctx, c.cfg.Pool, p.ID, time.Time{}, "", err.Error())
	}
	c.calls.WithLabelValues(kind, string(res.Status)).Inc()
	return c.record(ctx, p, res, kind)
}

// retryAt leaves p to a later attempt at at and wakes the worker then.
func (c *Charger) retryAt(ctx context.Context, p paymentstore.Payment, at time.Time, reason string) error {
	if err := paymentstore.RetryChargeAt(ctx, c.cfg.Pool, p.ID, at, "", reason); err != nil {
		return err
	}
	c.wake.At(at)
	return nil
}

// record applies what the provider said through the canonical writer.
func (c *Charger) record(ctx context.Context, p paymentstore.Payment, res paymentprovider.Payment, source string) error {
	to, ok := Outcome(res.Status).Target()
	if !ok {
		// Processing: the webhook will tell; read it ourselves after
		// RecheckAfter in case the webhook is lost.
		var at time.Time
		if c.cfg.RecheckAfter > 0 {
			at = time.Now().Add(c.cfg.RecheckAfter)
		}
		err := pgx.BeginFunc(ctx, c.cfg.Pool, func(tx pgx.Tx) error {
			if err := paymentstore.AttachProvider(ctx, tx, p.ID, res.ProviderID); err != nil {
				return err
			}
			return paymentstore.RetryChargeAt(ctx, tx, p.ID, at, res.ProviderStatus, "")
		})
		if err == nil {
			c.wake.At(at)
		}
		return err
	}
	o := paymentstore.Observation{To: to, ProviderPaymentID: res.ProviderID, Observed: res.ProviderStatus, Source: source}
	if to == payment.StatusFailed {
		o.Reason = cmp.Or(res.DeclineCode, string(res.Status))
	}
	_, err := paymentstore.RecordAlone(ctx, c.cfg.Pool, c.cfg.Outbox, p.ID, o)
	return err
}

func (c *Charger) refund(ctx context.Context, p paymentstore.Payment) error {
	r, err := c.cfg.Gateway.Refund(ctx, p.ProviderPaymentID, payment.RefundKey(p.ID))
	if err != nil {
		c.calls.WithLabelValues("refund", "error").Inc()
		// Already refunded (by an earlier attempt whose answer we lost, or
		// by the provider) is refused as a bad request: read the truth.
		if errors.Is(err, paymentprovider.ErrInvalidRequest) {
			if got, gerr := c.cfg.Gateway.Get(ctx, p.ProviderPaymentID); gerr == nil && got.Status == paymentprovider.StatusRefunded {
				return c.record(ctx, p, got, "refund")
			}
		}
		at := time.Now().Add(backoff.Exponential(p.Attempts, firstRetry, c.cfg.MaxBackoff))
		if err := paymentstore.RetryRefundAt(ctx, c.cfg.Pool, p.ID, at, err.Error()); err != nil {
			return err
		}
		c.wake.At(at)
		return nil
	}
	c.calls.WithLabelValues("refund", r.Status).Inc()
	c.cfg.Log.InfoContext(ctx, "refunded payment of cancelled order", "payment_id", p.ID, "order_id", p.OrderID,
		"provider_payment_id", p.ProviderPaymentID, "refund_id", r.ID, "amount", p.Amount, "currency", p.Currency)
	return pgx.BeginFunc(ctx, c.cfg.Pool, func(tx pgx.Tx) error {
		if err := paymentstore.SetRefundID(ctx, tx, p.ID, r.ID); err != nil {
			return err
		}
		_, err := paymentstore.MarkRefunded(ctx, tx, c.cfg.Outbox, p.ID, "refunded", "refund:"+r.ID)
		return err
	})
}
