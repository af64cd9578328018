// Package reconcilerprovider adapts the payment service's Stripe gateway (stripe-go,
// pointed at Stripe or provider-sim) to the reconciler's Provider, Lister and
// EventLister.
package reconcilerprovider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concordhq/concord/services/payment/paymentprovider"
	"github.com/concordhq/concord/services/reconciler"
)

// Gateway is the part of paymentprovider.Client the reconciler uses.
type Gateway interface {
	Get(ctx context.Context, providerID string) (paymentprovider.Payment, error)
	ListCreated(ctx context.Context, gte, lte time.Time, startingAfter string, limit int) (paymentprovider.Page[paymentprovider.Payment], error)
	ListEvents(ctx context.Context, since, until time.Time, startingAfter string) (paymentprovider.Page[paymentprovider.Event], error)
}

// Provider is the reconciler's view of the gateway.
type Provider struct {
	gw Gateway
}

// New wraps gw.
func New(gw Gateway) *Provider { return &Provider{gw: gw} }

var (
	_ reconciler.Provider    = (*Provider)(nil)
	_ reconciler.Lister      = (*Provider)(nil)
	_ reconciler.EventLister = (*Provider)(nil)
)

// External maps a gateway payment to the reconciler's statuses. The raw
// PaymentIntent status is kept except where it hides what happened: a
// requires_payment_method intent that carries a decline is "declined", and a
// succeeded one whose whole amount was refunded is "refunded". A status
// neither the gateway nor the reconciler knows passes through raw, so it is
// reviewed under its own name.
func External(p paymentprovider.Payment) reconciler.External {
	status := p.ProviderStatus
	switch p.Status {
	case paymentprovider.StatusDeclined:
		status = reconciler.ExtDeclined
	case paymentprovider.StatusRefunded:
		status = reconciler.ExtRefunded
	}
	return reconciler.External{ProviderID: p.ProviderID, Status: status, Created: p.Created}
}

// mapErr keeps the gateway's error (with its request id) and adds the
// reconciler's sentinel. Anything but "not found" counts as unavailable:
// an invalid-request answer about one payment says nothing about its state.
func mapErr(err error) error {
	if errors.Is(err, paymentprovider.ErrNotFound) {
		return fmt.Errorf("%w: %w", reconciler.ErrProviderNotFound, err)
	}
	return fmt.Errorf("%w: %w", reconciler.ErrProviderUnavailable, err)
}

// Get reads one PaymentIntent.
func (p *Provider) Get(ctx context.Context, providerID string) (reconciler.External, error) {
	pay, err := p.gw.Get(ctx, providerID)
	if err != nil {
		return reconciler.External{}, mapErr(err)
	}
	return External(pay), nil
}

// ListCreated lists PaymentIntents created in [gte, lte], 100 per call.
func (p *Provider) ListCreated(ctx context.Context, gte, lte time.Time, startingAfter string) (reconciler.ListPage, error) {
	page, err := p.gw.ListCreated(ctx, gte, lte, startingAfter, reconciler.ListLimit)
	if err != nil {
		return reconciler.ListPage{}, mapErr(err)
	}
	out := reconciler.ListPage{HasMore: page.HasMore, Next: page.Next, Items: make([]reconciler.External, len(page.Items))}
	for i, it := range page.Items {
		out.Items[i] = External(it)
	}
	return out, nil
}

// ListEvents lists the provider's events created in [since, until].
func (p *Provider) ListEvents(ctx context.Context, since, until time.Time, startingAfter string) (reconciler.EventPage, error) {
	page, err := p.gw.ListEvents(ctx, since, until, startingAfter)
	if err != nil {
		return reconciler.EventPage{}, mapErr(err)
	}
	out := reconciler.EventPage{HasMore: page.HasMore, Next: page.Next, Events: make([]reconciler.ProviderEvent, len(page.Items))}
	for i, ev := range page.Items {
		pe := reconciler.ProviderEvent{ID: ev.ID, Type: ev.Type, Created: ev.Created, ProviderID: ev.PaymentID}
		if ev.Payment != nil {
			e := External(*ev.Payment)
			pe.Snapshot = &e
		}
		out.Events[i] = pe
	}
	return out, nil
}
