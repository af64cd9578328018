// Package paymentapi serves the payment service's webhook endpoint:
//
//	POST /webhooks/stripe
//
// A delivery is verified (Stripe-Signature), stored raw in provider_events
// (deduplicated on the provider's event id, committed before anything acts
// on it), then applied through the canonical writer and marked applied.
// Only then is it answered 200; any failure answers 5xx so the provider
// delivers it again, and a stored event not yet marked applied is applied
// on that redelivery rather than answered as a duplicate.
package paymentapi

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/charger"
	"github.com/concordhq/concord/services/payment/holder"
	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/payment/paymentstore"
)

// MaxWebhookBody bounds a delivery; Stripe's events are far smaller.
const MaxWebhookBody = 1 << 20

// Webhook handles provider deliveries.
type Webhook struct {
	Pool *pgxpool.Pool
	// Outbox routes the events of the transitions webhooks cause.
	Outbox outbox.Writer
	Secret string
	Log    *slog.Logger
	// AfterApply, when set, is called after a delivery changed a payment
	// (the service nudges its refunder).
	AfterApply func()

	deliveries *prometheus.CounterVec
}

// NewWebhook returns the handler, registering its metrics on reg if set.
func NewWebhook(pool *pgxpool.Pool, events outbox.Writer, secret string, log *slog.Logger, reg prometheus.Registerer) (*Webhook, error) {
	w := &Webhook{Pool: pool, Outbox: events, Secret: secret, Log: log,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "concord_payment_webhook_deliveries_total",
			Help: "Webhook deliveries by result: applied, unchanged, duplicate, unknown_payment, bad_signature, error."}, []string{"result"})}
	if reg != nil {
		if err := reg.Register(w.deliveries); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Register mounts the endpoint on mux.
func (h *Webhook) Register(mux *http.ServeMux) { mux.Handle("POST /webhooks/stripe", h) }

func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBody))
	if err != nil {
		h.deliveries.WithLabelValues("bad_request").Inc()
		http.Error(w, "body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	ev, err := paymentprovider.Verify(body, r.Header.Get("Stripe-Signature"), h.Secret)
	if err != nil {
		h.deliveries.WithLabelValues("bad_signature").Inc()
		h.Log.WarnContext(r.Context(), "webhook rejected", "err", err)
		http.Error(w, "signature verification failed", http.StatusBadRequest)
		return
	}
	result, err := h.apply(r.Context(), ev, body)
	if err != nil {
		h.deliveries.WithLabelValues("error").Inc()
		h.Log.ErrorContext(r.Context(), "webhook not applied; the provider will retry", "event_id", ev.ID, "type", ev.Type, "err", err)
		http.Error(w, "not applied, retry", http.StatusServiceUnavailable)
		return
	}
	h.deliveries.WithLabelValues(result).Inc()
	if result == paymentstore.ResultApplied && h.AfterApply != nil {
		h.AfterApply()
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"received":true,"result":"` + result + `"}`))
}

// Events are the event types the endpoint acts on; every other type is
// stored and answered "ignored". Subscribe the provider's webhook endpoint
// to these only (Stripe's enabled_events): each ignored delivery still
// costs a request and a transaction, and a successful charge comes with
// two of them (payment_intent.created, charge.succeeded).
var Events = []string{
	"payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.canceled",
	"payment_intent.processing", "payment_intent.amount_capturable_updated", "refund.created",
}

// apply stores the delivery, then applies it. The common delivery is news
// the charger's answer already applied (payment_intent.succeeded for a
// payment already paid); it costs two round trips and no transaction:
// storing the event while reading its payment, then marking it unchanged.
// Anything that may move the payment goes through the canonical writer in
// a transaction under the payment's row lock.
func (h *Webhook) apply(ctx context.Context, ev paymentprovider.Event, body []byte) (result string, err error) {
	in := paymentstore.ProviderEvent{ID: ev.ID, Type: ev.Type, ProviderPaymentID: ev.PaymentID, Payload: body}
	if ev.Payment != nil {
		in.PaymentID, _ = strconv.ParseInt(ev.Payment.Metadata["payment_id"], 10, 64)
	}
	pending, p, found, err := paymentstore.Receive(ctx, h.Pool, in)
	if err != nil {
		return "", err
	}
	if !pending {
		return "duplicate", nil
	}
	if ev.Payment != nil && ev.Payment.ManualCapture {
		return h.applyHold(ctx, ev)
	}
	o, ok := observationOf(ev)
	switch {
	case !ok:
		return paymentstore.ResultIgnored, paymentstore.MarkProviderEventApplied(ctx, h.Pool, ev.ID, paymentstore.ResultIgnored)
	case !found:
		return paymentstore.ResultUnknownPayment, paymentstore.MarkProviderEventApplied(ctx, h.Pool, ev.ID, paymentstore.ResultUnknownPayment)
	case unchanged(p, o):
		return paymentstore.ResultUnchanged, paymentstore.MarkUnchanged(ctx, h.Pool, ev.ID, p, o.Observed)
	}
	ctx, span := applySpan(ctx, ev, p.Traceparent, p.OrderID, attribute.Int64("concord.payment_id", p.ID))
	defer span.End()
	if o.To != "" {
		return paymentstore.ApplyProviderEvent(ctx, h.Pool, h.Outbox, p.ID, o, ev.ID)
	}
	// processing: nothing moves, but the provider's id is worth keeping.
	err = pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error {
		err := paymentstore.AttachProvider(ctx, tx, p.ID, ev.PaymentID)
		result = paymentstore.ResultUnchanged
		if errors.Is(err, paymentstore.ErrProviderMismatch) {
			// Two provider payments for one order: record it for the
			// reconciler; retrying the delivery would not help.
			result, err = paymentstore.ResultProviderMismatch, nil
		}
		if err != nil {
			return err
		}
		return paymentstore.MarkProviderEventApplied(ctx, tx, ev.ID, result)
	})
	return result, err
}

// tracer follows the global tracer provider (see kit.StartTracing).
var tracer = otel.Tracer("github.com/concordhq/concord/services/payment/paymentapi")

// applySpan starts the span under which a delivery moves a payment or a
// hold, and the event the move appends: a child of the span stored with
// the row (traceparent: the span that created the payment, or the hold's
// authorize command), so its news joins the order's trace whatever the
// provider sends: Stripe sends no trace context, so its delivery's request
// is a trace of its own, which the span links to. (provider-sim, traced,
// sends the context of the call that caused the event; that request is of
// the row's trace already and stays the parent.)
func applySpan(ctx context.Context, ev paymentprovider.Event, traceparent, orderID string, row attribute.KeyValue) (context.Context, trace.Span) {
	ctx, opts := kit.ContinueTrace(ctx, traceparent)
	return tracer.Start(ctx, "apply "+ev.Type, append(opts, trace.WithAttributes(attribute.String("concord.provider_event_id", ev.ID),
		row, attribute.String("concord.correlation_id", orderID)))...)
}

// observationOf reads what an event says about its payment. ok is false
// for events that say nothing we act on (payment_intent.created, charge.*).
// A processing event has no target status (To is empty): it only ties the
// provider's id to the payment.
func observationOf(ev paymentprovider.Event) (o paymentstore.Observation, ok bool) {
	o = paymentstore.Observation{ProviderPaymentID: ev.PaymentID, Source: "webhook:" + ev.ID}
	switch {
	case ev.Payment != nil:
		switch ev.Type {
		case "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.canceled", "payment_intent.processing":
		default:
			return o, false
		}
		o.Observed = ev.Payment.ProviderStatus
		o.To, _ = charger.Outcome(ev.Payment.Status).Target()
		if o.To == payment.StatusFailed {
			o.Reason = cmp.Or(ev.Payment.DeclineCode, ev.Type)
		}
	case ev.Refund != nil && ev.Refund.Status == "succeeded":
		o.To, o.Observed = payment.StatusRefunded, "refunded"
	default:
		return o, false
	}
	return o, true
}

// unchanged reports whether the canonical writer would leave p as it is
// for o: the provider's id is already attached and the status would not
// move. Read without the row lock, it cannot be overtaken: a payment only
// moves forward (payment.Decide), and news that is stale for a status is
// stale for every later one.
func unchanged(p paymentstore.Payment, o paymentstore.Observation) bool {
	if o.ProviderPaymentID != p.ProviderPaymentID {
		return false
	}
	if o.To == "" {
		return true
	}
	d, err := payment.Decide(p.Status, o.To)
	return err == nil && d != payment.Apply
}

// applyHold applies what an event says about an authorization hold (a
// manual-capture PaymentIntent of the orchestrated checkout) to its
// payment_holds row: authorized (amount_capturable_updated), captured
// (succeeded), declined (payment_failed), released or expired (canceled).
// The row only moves forward, so a late or repeated event changes
// nothing. The holder's commands read the row: a capture finds an expired
// hold refused without calling the provider, and a hold whose authorize
// answer was lost is known as soon as its webhook arrives.
func (h *Webhook) applyHold(ctx context.Context, ev paymentprovider.Event) (result string, err error) {
	switch ev.Type {
	case "payment_intent.amount_capturable_updated", "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.canceled":
	default:
		return paymentstore.ResultIgnored, paymentstore.MarkProviderEventApplied(ctx, h.Pool, ev.ID, paymentstore.ResultIgnored)
	}
	to, ok := holder.StatusOf(*ev.Payment)
	if !ok {
		return paymentstore.ResultIgnored, paymentstore.MarkProviderEventApplied(ctx, h.Pool, ev.ID, paymentstore.ResultIgnored)
	}
	ch := paymentstore.HoldChange{To: to, ProviderPaymentID: ev.PaymentID, Observed: ev.Payment.ProviderStatus,
		AmountCaptured: ev.Payment.AmountReceived, FailureReason: ev.Payment.DeclineCode}
	hold, found, err := paymentstore.ObservedHold(ctx, h.Pool, ev.PaymentID, ev.Payment.Metadata["hold_key"])
	if err != nil {
		return "", err
	}
	if !found {
		return paymentstore.ResultUnknownPayment, paymentstore.MarkProviderEventApplied(ctx, h.Pool, ev.ID, paymentstore.ResultUnknownPayment)
	}
	ctx, span := applySpan(ctx, ev, hold.Traceparent, hold.OrderID, attribute.String("concord.hold_key", hold.Key))
	defer span.End()
	err = pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error {
		moved, err := paymentstore.ObserveHold(ctx, tx, hold.Key, ch)
		switch {
		case errors.Is(err, paymentstore.ErrProviderMismatch):
			result = paymentstore.ResultProviderMismatch
		case err != nil:
			return err
		case moved:
			result = paymentstore.ResultApplied
		default:
			result = paymentstore.ResultUnchanged
		}
		return paymentstore.MarkProviderEventApplied(ctx, tx, ev.ID, result)
	})
	return result, err
}
