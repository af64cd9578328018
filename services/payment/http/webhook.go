// Package http serves the payment service's webhook endpoint:
//
//	POST /webhooks/stripe
//
// A delivery is verified (Stripe-Signature), stored raw in provider_events
// (deduplicated on the provider's event id) and applied through the
// canonical writer, all in one transaction. Only then is it answered 200;
// any failure answers 5xx so the provider delivers it again.
package http

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/concordhq/concord/services/payment"
	"github.com/concordhq/concord/services/payment/charger"
	"github.com/concordhq/concord/services/payment/postgres"
	stripegw "github.com/concordhq/concord/services/payment/stripe"
)

// MaxWebhookBody bounds a delivery; Stripe's events are far smaller.
const MaxWebhookBody = 1 << 20

// Webhook handles provider deliveries.
type Webhook struct {
	Pool   *pgxpool.Pool
	Secret string
	Log    *slog.Logger
	// AfterApply, when set, is called after a delivery changed a payment
	// (the service nudges its refunder).
	AfterApply func()

	deliveries *prometheus.CounterVec
}

// NewWebhook returns the handler, registering its metrics on reg if set.
func NewWebhook(pool *pgxpool.Pool, secret string, log *slog.Logger, reg prometheus.Registerer) (*Webhook, error) {
	w := &Webhook{Pool: pool, Secret: secret, Log: log,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "payment_webhook_deliveries_total",
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
	ev, err := stripegw.Verify(body, r.Header.Get("Stripe-Signature"), h.Secret)
	if err != nil {
		h.deliveries.WithLabelValues("bad_signature").Inc()
		h.Log.Warn("webhook rejected", "err", err)
		http.Error(w, "signature verification failed", http.StatusBadRequest)
		return
	}
	result, err := h.apply(r.Context(), ev, body)
	if err != nil {
		h.deliveries.WithLabelValues("error").Inc()
		h.Log.Error("webhook not applied; the provider will retry", "event_id", ev.ID, "type", ev.Type, "err", err)
		http.Error(w, "not applied, retry", http.StatusServiceUnavailable)
		return
	}
	h.deliveries.WithLabelValues(result).Inc()
	if result == "applied" && h.AfterApply != nil {
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
	"payment_intent.processing", "refund.created",
}

// outcomeOf reads what an event says about its payment. ok is false for
// events that say nothing we act on (payment_intent.created, charge.*).
func outcomeOf(ev stripegw.Event) (payment.Outcome, string, bool) {
	switch {
	case ev.Payment != nil:
		switch ev.Type {
		case "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.canceled", "payment_intent.processing":
			return charger.Outcome(ev.Payment.Status), ev.Payment.DeclineCode, true
		}
	case ev.Refund != nil && ev.Refund.Status == "succeeded":
		return payment.OutcomeRefunded, "", true
	}
	return 0, "", false
}

func (h *Webhook) apply(ctx context.Context, ev stripegw.Event, body []byte) (result string, err error) {
	err = pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error {
		fresh, err := postgres.StoreProviderEvent(ctx, tx, ev.ID, ev.Type, ev.PaymentID, body)
		if err != nil {
			return err
		}
		if !fresh {
			result = "duplicate"
			return nil
		}
		outcome, reason, ok := outcomeOf(ev)
		if !ok {
			result = "ignored"
			return postgres.MarkProviderEventApplied(ctx, tx, ev.ID, result)
		}
		p, err := h.find(ctx, tx, ev)
		if errors.Is(err, postgres.ErrNotFound) {
			result = "unknown_payment"
			return postgres.MarkProviderEventApplied(ctx, tx, ev.ID, result)
		}
		if err != nil {
			return err
		}
		o := postgres.Observation{ProviderPaymentID: ev.PaymentID, Source: "webhook:" + ev.ID}
		if ev.Payment != nil {
			o.Observed = ev.Payment.ProviderStatus
		}
		changed := false
		switch outcome {
		case payment.OutcomeSucceeded:
			o.To = payment.StatusPaid
		case payment.OutcomeDeclined:
			o.To, o.Reason = payment.StatusFailed, reason
			if o.Reason == "" {
				o.Reason = ev.Type
			}
		case payment.OutcomeRefunded:
			o.To, o.Observed = payment.StatusRefunded, "refunded"
		default:
			// processing: nothing moves, but the provider's id is worth
			// keeping.
			err = postgres.AttachProvider(ctx, tx, p.ID, ev.PaymentID)
		}
		if o.To != "" {
			changed, err = postgres.Record(ctx, tx, p.ID, o)
		}
		if errors.Is(err, postgres.ErrProviderMismatch) {
			// Two provider payments for one order: record it for the
			// reconciler; retrying the delivery would not help.
			result = "provider_mismatch"
			return postgres.MarkProviderEventApplied(ctx, tx, ev.ID, result)
		}
		if err != nil {
			return err
		}
		result = "unchanged"
		if changed {
			result = "applied"
		}
		return postgres.MarkProviderEventApplied(ctx, tx, ev.ID, result)
	})
	return result, err
}

// find locates the payment an event is about: by the provider's id, or,
// when our first call's answer was lost before we stored that id, by the
// payment id we put in the intent's metadata.
func (h *Webhook) find(ctx context.Context, tx pgx.Tx, ev stripegw.Event) (postgres.Payment, error) {
	if ev.PaymentID != "" {
		p, err := postgres.ByProviderID(ctx, tx, ev.PaymentID)
		if !errors.Is(err, postgres.ErrNotFound) {
			return p, err
		}
	}
	if ev.Payment != nil {
		if s := ev.Payment.Metadata["payment_id"]; s != "" {
			if id, err := strconv.ParseInt(s, 10, 64); err == nil {
				return postgres.Get(ctx, tx, id)
			}
		}
	}
	return postgres.Payment{}, postgres.ErrNotFound
}
