// Package holder is the payment service's worker for the orchestrated
// checkout's authorization holds. It follows the charger's pattern: it
// never calls the provider for a command that is not committed. It takes
// due commands from hold_commands (stored by the consumer with the hold's
// row), decides with the pure rules of package payment what each needs,
// calls the provider with the command's idempotency key, stores the
// provider's PaymentIntent id as soon as it is known, and records the
// outcome together with the saga.step_replied reply in one transaction.
//
// A hold's commands take effect one at a time, in the order the
// orchestrator sent them: a cancel sent after a capture that is still
// pending (the orchestrator stopped waiting for it) is taken up only once
// the capture is answered, and then refunds it. See ClaimHoldCommands.
//
// A call the provider did not answer (timeout, 429, 5xx) leaves the command
// pending; it is tried again later with the same key, and when the
// PaymentIntent is already known it is read first, so an effect that did
// happen is recorded instead of asked for again. The orchestrator hears
// only definite outcomes.
package holder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

// tracer follows the global tracer provider (see kit.StartTracing).
var tracer = otel.Tracer("github.com/concordhq/concord/services/payment/holder")

// Gateway is the part of the provider gateway the holder uses.
type Gateway interface {
	Authorize(ctx context.Context, in paymentprovider.Intent) (paymentprovider.Payment, error)
	Capture(ctx context.Context, providerID string, amount int64, idemKey string) (paymentprovider.Payment, error)
	CancelHold(ctx context.Context, providerID, idemKey string) (paymentprovider.Payment, error)
	Refund(ctx context.Context, providerID, idemKey string) (paymentprovider.Refund, error)
	Get(ctx context.Context, providerID string) (paymentprovider.Payment, error)
}

// DefaultPollInterval is Config.PollInterval's default.
const DefaultPollInterval = time.Second

// Config configures a Holder; zero values take the defaults named.
type Config struct {
	Pool *pgxpool.Pool
	// Outbox routes the replies (the service's topic prefix).
	Outbox  outbox.Writer
	Gateway Gateway
	Log     *slog.Logger
	// Concurrency bounds provider calls in flight (default 16).
	Concurrency int
	// PollInterval is how often due commands are looked for when nothing
	// wakes the worker (default 1s). A command is taken at once when it is
	// committed: the service calls Nudge after its consumer commits and
	// after a webhook moved a hold, and a retry this worker schedules wakes
	// it when due. The poll finds what no wake-up announced (a lost nudge,
	// an expired lease, another instance's retry) this late at most.
	PollInterval time.Duration
	// Lease is how long a claimed command is left to one attempt; it must
	// exceed a provider call's timeout (default 15s).
	Lease time.Duration
	// FirstRetry is the wait after the first attempt that got no definite
	// answer (or waited for the hold's authorization); it doubles per
	// attempt up to MaxBackoff (defaults 200ms and 10s).
	FirstRetry time.Duration
	MaxBackoff time.Duration
	// Registerer receives the holder's metrics when set.
	Registerer prometheus.Registerer
}

// Holder is the worker; Run it once.
type Holder struct {
	cfg     Config
	calls   *prometheus.CounterVec
	replies *prometheus.CounterVec
	wake    *wake.Signal
}

// New checks cfg and returns a Holder.
func New(cfg Config) (*Holder, error) {
	if cfg.Pool == nil || cfg.Gateway == nil {
		return nil, errors.New("holder: Pool and Gateway are required")
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
	if cfg.FirstRetry <= 0 {
		cfg.FirstRetry = 200 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	h := &Holder{cfg: cfg, wake: wake.New(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_payment_hold_provider_calls_total",
			Help: "Provider calls for authorization holds by kind (authorize, capture, cancel, refund, get) and outcome."}, []string{"kind", "outcome"}),
		replies: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_payment_hold_replies_total",
			Help: "saga.step_replied replies the holder recorded, by command type and outcome."}, []string{"command_type", "outcome"})}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{h.calls, h.replies} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("holder metrics: %w", err)
			}
		}
	}
	return h, nil
}

// Nudge makes the worker look for due commands now.
func (h *Holder) Nudge() { h.wake.Now() }

// retryAt leaves command c to a later attempt at at, noting why, and wakes
// the worker then.
func (h *Holder) retryAt(ctx context.Context, c paymentstore.HoldCommand, at time.Time, reason string) error {
	if err := paymentstore.RetryHoldCommandAt(ctx, h.cfg.Pool, c.Key, at, reason); err != nil {
		return err
	}
	h.wake.At(at)
	return nil
}

// Run works until ctx is done, then lets the attempts in flight finish
// and record their outcome before returning: a hold the provider placed
// must not be forgotten because we are shutting down.
func (h *Holder) Run(ctx context.Context) error {
	t := time.NewTicker(h.cfg.PollInterval)
	defer t.Stop()
	wctx := context.WithoutCancel(ctx)
	for {
		cmds, err := paymentstore.ClaimHoldCommands(ctx, h.cfg.Pool, h.cfg.Concurrency, h.cfg.Lease)
		if err != nil && ctx.Err() == nil {
			h.cfg.Log.Warn("holder pass failed", "err", err)
		}
		var wg sync.WaitGroup
		for _, c := range cmds {
			wg.Go(func() {
				if err := h.Process(wctx, c); err != nil {
					h.cfg.Log.Warn("hold command attempt", "idempotency_key", c.Key, "command_type", c.Type, "saga_id", c.SagaID, "err", err)
				}
			})
		}
		wg.Wait()
		if len(cmds) > 0 {
			// More may be due: a full claim left some, and a command
			// settled may let the next one of its hold go (a cancel
			// waits for the capture sent before it).
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-h.wake.C():
		}
	}
}

// Process makes one attempt at a claimed command, under a span that is a
// child of the command's consumer span (its stored traceparent): the
// provider calls and the reply are in the saga's trace.
func (h *Holder) Process(ctx context.Context, c paymentstore.HoldCommand) (err error) {
	ctx, opts := kit.ContinueTrace(kit.WithCorrelationID(ctx, c.CorrelationID), c.Traceparent)
	ctx, span := tracer.Start(ctx, "hold attempt "+string(c.Type), append(opts, trace.WithAttributes(
		attribute.String("concord.idempotency_key", c.Key), attribute.String("concord.saga_id", c.SagaID),
		attribute.String("concord.correlation_id", c.CorrelationID)))...)
	defer func() {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	hold, found, err := paymentstore.HoldByKey(ctx, h.cfg.Pool, c.HoldKey)
	if err != nil {
		return h.retry(ctx, c, err)
	}
	switch c.Type {
	case contract.TypePaymentAuthorizeHold:
		return h.authorize(ctx, c, hold, found)
	case contract.TypePaymentCaptureHold:
		return h.capture(ctx, c, hold, found)
	case contract.TypePaymentCancelHold:
		return h.cancel(ctx, c, hold, found)
	}
	return h.fail(ctx, c, paymentstore.HoldChange{}, "unknown_command")
}

func (h *Holder) authorize(ctx context.Context, c paymentstore.HoldCommand, hold paymentstore.Hold, found bool) error {
	if !found {
		return h.fail(ctx, c, paymentstore.HoldChange{}, payment.ReasonHoldNotFound)
	}
	act, reason := payment.AuthorizeStep(hold.Status)
	switch act {
	case payment.StepSucceed:
		return h.succeed(ctx, c, paymentstore.HoldChange{}, hold.Amount, hold.ProviderPaymentID)
	case payment.StepFail:
		return h.fail(ctx, c, paymentstore.HoldChange{}, cmp.Or(reason, hold.FailureReason, "declined"))
	}
	kind := "authorize"
	if hold.ProviderPaymentID != "" {
		// An earlier attempt got as far as the provider's id: read what
		// became of it rather than ask again.
		kind = "get"
		res, err := h.cfg.Gateway.Get(ctx, hold.ProviderPaymentID)
		if err != nil {
			return h.unanswered(ctx, c, kind, err)
		}
		return h.authorized(ctx, c, hold, res, kind)
	}
	res, err := h.cfg.Gateway.Authorize(ctx, paymentprovider.Intent{IdempotencyKey: hold.Key, Amount: hold.Amount,
		Currency: hold.Currency, PaymentMethod: hold.PaymentMethod, Description: "order " + hold.OrderID,
		Metadata: map[string]string{"hold_key": hold.Key, "saga_id": hold.SagaID, "order_id": hold.OrderID}})
	if err != nil {
		if errors.Is(err, paymentprovider.ErrInvalidRequest) {
			h.calls.WithLabelValues(kind, "refused").Inc()
			return h.fail(ctx, c, paymentstore.HoldChange{To: payment.HoldDeclined, FailureReason: payment.ReasonProviderRefused},
				payment.ReasonProviderRefused)
		}
		return h.unanswered(ctx, c, kind, err)
	}
	return h.authorized(ctx, c, hold, res, kind)
}

// authorized records what the provider said about a hold being placed.
func (h *Holder) authorized(ctx context.Context, c paymentstore.HoldCommand, hold paymentstore.Hold, res paymentprovider.Payment, kind string) error {
	h.calls.WithLabelValues(kind, string(res.Status)).Inc()
	if err := paymentstore.AttachHoldProvider(ctx, h.cfg.Pool, hold.Key, res.ProviderID); err != nil {
		return h.retry(ctx, c, err)
	}
	to, ok := StatusOf(res)
	ch := paymentstore.HoldChange{To: to, ProviderPaymentID: res.ProviderID, Observed: res.ProviderStatus, AmountCaptured: res.AmountReceived}
	switch {
	case !ok:
		return h.retry(ctx, c, fmt.Errorf("provider reports %s for hold %s", res.ProviderStatus, res.ProviderID))
	case to == payment.HoldDeclined:
		reason := cmp.Or(res.DeclineCode, "declined")
		ch.FailureReason = reason
		return h.fail(ctx, c, ch, reason)
	}
	return h.succeed(ctx, c, ch, hold.Amount, res.ProviderID)
}

func (h *Holder) capture(ctx context.Context, c paymentstore.HoldCommand, hold paymentstore.Hold, found bool) error {
	if found && hold.Status == payment.HoldAuthorized && c.Currency != "" && c.Currency != hold.Currency {
		return h.fail(ctx, c, paymentstore.HoldChange{}, payment.ReasonCurrencyMismatch)
	}
	act, reason := payment.CaptureStep(hold.Status, found, hold.Amount, c.Amount)
	switch act {
	case payment.StepWait:
		return h.wait(ctx, c)
	case payment.StepFail:
		return h.fail(ctx, c, paymentstore.HoldChange{}, reason)
	case payment.StepSucceed:
		return h.succeed(ctx, c, paymentstore.HoldChange{}, hold.AmountCaptured, hold.ProviderPaymentID)
	}
	if c.Attempts > 1 {
		// The last attempt may have captured without our hearing: look.
		got, err := h.cfg.Gateway.Get(ctx, hold.ProviderPaymentID)
		if err != nil {
			return h.unanswered(ctx, c, "get", err)
		}
		h.calls.WithLabelValues("get", string(got.Status)).Inc()
		if to, ok := StatusOf(got); ok && to != payment.HoldAuthorized {
			return h.captured(ctx, c, got, to)
		}
	}
	res, err := h.cfg.Gateway.Capture(ctx, hold.ProviderPaymentID, c.Amount, c.Key)
	switch {
	case errors.Is(err, paymentprovider.ErrHoldExpired):
		h.calls.WithLabelValues("capture", "expired").Inc()
		return h.fail(ctx, c, paymentstore.HoldChange{To: payment.HoldExpired, Observed: string(paymentprovider.StatusCanceled)}, payment.ReasonHoldExpired)
	case errors.Is(err, paymentprovider.ErrInvalidRequest):
		// Refused: read the truth (captured meanwhile, released, expired).
		h.calls.WithLabelValues("capture", "refused").Inc()
		got, gerr := h.cfg.Gateway.Get(ctx, hold.ProviderPaymentID)
		if gerr != nil {
			return h.unanswered(ctx, c, "get", gerr)
		}
		if to, ok := StatusOf(got); ok && to != payment.HoldAuthorized {
			return h.captured(ctx, c, got, to)
		}
		return h.fail(ctx, c, paymentstore.HoldChange{}, payment.ReasonProviderRefused)
	case err != nil:
		return h.unanswered(ctx, c, "capture", err)
	}
	h.calls.WithLabelValues("capture", string(res.Status)).Inc()
	return h.captured(ctx, c, res, payment.HoldCaptured)
}

// captured records the provider's state of a hold a capture was asked of.
func (h *Holder) captured(ctx context.Context, c paymentstore.HoldCommand, res paymentprovider.Payment, to payment.HoldStatus) error {
	ch := paymentstore.HoldChange{To: to, ProviderPaymentID: res.ProviderID, Observed: res.ProviderStatus, AmountCaptured: res.AmountReceived}
	switch to {
	case payment.HoldCaptured, payment.HoldRefunded:
		return h.succeed(ctx, c, ch, res.AmountReceived, res.ProviderID)
	case payment.HoldExpired:
		return h.fail(ctx, c, ch, payment.ReasonHoldExpired)
	}
	return h.fail(ctx, c, ch, payment.ReasonHoldCanceled)
}

func (h *Holder) cancel(ctx context.Context, c paymentstore.HoldCommand, hold paymentstore.Hold, found bool) error {
	switch payment.CancelStep(hold.Status, found) {
	case payment.StepWait:
		return h.wait(ctx, c)
	case payment.StepSucceed:
		ch := paymentstore.HoldChange{}
		if !found {
			ch.To = payment.HoldVoid // refuse an authorize that comes after its compensation
		}
		return h.succeed(ctx, c, ch, 0, hold.ProviderPaymentID)
	case payment.StepRefund:
		return h.refund(ctx, c, hold)
	}
	if c.Attempts > 1 {
		got, err := h.cfg.Gateway.Get(ctx, hold.ProviderPaymentID)
		if err != nil {
			return h.unanswered(ctx, c, "get", err)
		}
		h.calls.WithLabelValues("get", string(got.Status)).Inc()
		if to, ok := StatusOf(got); ok && to != payment.HoldAuthorized {
			return h.canceled(ctx, c, hold, got, to)
		}
	}
	res, err := h.cfg.Gateway.CancelHold(ctx, hold.ProviderPaymentID, c.Key)
	switch {
	case errors.Is(err, paymentprovider.ErrInvalidRequest):
		// No longer cancelable: captured meanwhile (refund it), or already
		// released or expired (nothing to undo).
		h.calls.WithLabelValues("cancel", "refused").Inc()
		got, gerr := h.cfg.Gateway.Get(ctx, hold.ProviderPaymentID)
		if gerr != nil {
			return h.unanswered(ctx, c, "get", gerr)
		}
		to, ok := StatusOf(got)
		if !ok || to == payment.HoldAuthorized {
			return h.retry(ctx, c, err)
		}
		return h.canceled(ctx, c, hold, got, to)
	case err != nil:
		return h.unanswered(ctx, c, "cancel", err)
	}
	h.calls.WithLabelValues("cancel", string(res.Status)).Inc()
	to, _ := StatusOf(res)
	return h.canceled(ctx, c, hold, res, to)
}

// canceled records the provider's state of a hold a compensation was
// asked of: released or expired is done; captured still needs a refund.
func (h *Holder) canceled(ctx context.Context, c paymentstore.HoldCommand, hold paymentstore.Hold, res paymentprovider.Payment, to payment.HoldStatus) error {
	ch := paymentstore.HoldChange{To: to, ProviderPaymentID: res.ProviderID, Observed: res.ProviderStatus, AmountCaptured: res.AmountReceived}
	if to == payment.HoldCaptured {
		hold.Status, hold.AmountCaptured = payment.HoldCaptured, res.AmountReceived
		return h.refund(ctx, c, hold)
	}
	var amount int64
	if to == payment.HoldReleased || to == payment.HoldExpired {
		amount = hold.Amount
	}
	return h.succeed(ctx, c, ch, amount, res.ProviderID)
}

func (h *Holder) refund(ctx context.Context, c paymentstore.HoldCommand, hold paymentstore.Hold) error {
	r, err := h.cfg.Gateway.Refund(ctx, hold.ProviderPaymentID, c.Key)
	if err != nil {
		h.calls.WithLabelValues("refund", "error").Inc()
		if errors.Is(err, paymentprovider.ErrInvalidRequest) {
			// Already refunded (by an earlier attempt whose answer was
			// lost, or by the provider): read the truth.
			if got, gerr := h.cfg.Gateway.Get(ctx, hold.ProviderPaymentID); gerr == nil && got.Status == paymentprovider.StatusRefunded {
				return h.succeed(ctx, c, paymentstore.HoldChange{To: payment.HoldRefunded, Observed: got.ProviderStatus}, hold.AmountCaptured, hold.ProviderPaymentID)
			}
		}
		return h.unanswered(ctx, c, "refund", err)
	}
	h.calls.WithLabelValues("refund", r.Status).Inc()
	return h.succeed(ctx, c, paymentstore.HoldChange{To: payment.HoldRefunded, AmountCaptured: hold.AmountCaptured, RefundID: r.ID},
		r.Amount, hold.ProviderPaymentID)
}

// StatusOf maps the provider's view of a hold to ours; ok is false while
// the provider itself has no outcome (pending, processing, unknown).
func StatusOf(p paymentprovider.Payment) (payment.HoldStatus, bool) {
	switch p.Status {
	case paymentprovider.StatusAuthorized:
		return payment.HoldAuthorized, true
	case paymentprovider.StatusSucceeded:
		return payment.HoldCaptured, true
	case paymentprovider.StatusRefunded:
		return payment.HoldRefunded, true
	case paymentprovider.StatusDeclined:
		return payment.HoldDeclined, true
	case paymentprovider.StatusCanceled:
		if p.CancellationReason == "automatic" {
			return payment.HoldExpired, true
		}
		return payment.HoldReleased, true
	}
	return "", false
}

func (h *Holder) succeed(ctx context.Context, c paymentstore.HoldCommand, ch paymentstore.HoldChange, amount int64, providerID string) error {
	r := paymentstore.HoldReply{Outcome: contract.SagaStepRepliedV1OutcomeSucceeded, ProviderPaymentID: providerID}
	if amount > 0 {
		r.Amount = &amount
	}
	return h.settle(ctx, c, ch, r)
}

func (h *Holder) fail(ctx context.Context, c paymentstore.HoldCommand, ch paymentstore.HoldChange, reason string) error {
	no := false
	return h.settle(ctx, c, ch, paymentstore.HoldReply{Outcome: contract.SagaStepRepliedV1OutcomeFailed, Reason: reason, Retryable: &no,
		ProviderPaymentID: ch.ProviderPaymentID})
}

func (h *Holder) settle(ctx context.Context, c paymentstore.HoldCommand, ch paymentstore.HoldChange, r paymentstore.HoldReply) error {
	replied, err := paymentstore.SettleHoldCommand(ctx, h.cfg.Pool, h.cfg.Outbox, c, ch, r)
	if err != nil {
		return h.retry(ctx, c, err)
	}
	if replied {
		h.replies.WithLabelValues(string(c.Type), string(r.Outcome)).Inc()
		h.cfg.Log.InfoContext(ctx, "hold command answered", "idempotency_key", c.Key, "command_type", c.Type, "saga_id", c.SagaID,
			"outcome", r.Outcome, "reason", r.Reason, "provider_payment_id", r.ProviderPaymentID)
	}
	return nil
}

// unanswered handles a call without a definite answer: try again later
// with the same key. An idempotency conflict is a bug in key derivation;
// the command is parked for an operator rather than guessed at.
func (h *Holder) unanswered(ctx context.Context, c paymentstore.HoldCommand, kind string, err error) error {
	if errors.Is(err, paymentprovider.ErrIdempotencyConflict) {
		h.calls.WithLabelValues(kind, "error").Inc()
		return paymentstore.RetryHoldCommandAt(ctx, h.cfg.Pool, c.Key, time.Time{}, err.Error())
	}
	h.calls.WithLabelValues(kind, "unavailable").Inc()
	return h.retry(ctx, c, err)
}

func (h *Holder) retry(ctx context.Context, c paymentstore.HoldCommand, cause error) error {
	at := time.Now().Add(backoff.Exponential(c.Attempts, h.cfg.FirstRetry, h.cfg.MaxBackoff))
	if err := h.retryAt(ctx, c, at, cause.Error()); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// wait puts a command back until the hold's authorization is known.
func (h *Holder) wait(ctx context.Context, c paymentstore.HoldCommand) error {
	at := time.Now().Add(backoff.Exponential(c.Attempts, h.cfg.FirstRetry, h.cfg.MaxBackoff))
	return h.retryAt(ctx, c, at, "waiting for the hold's authorization")
}
