package reconciler

import (
	"context"
	"time"
)

// External is the provider's view of one payment, reduced to what Classify
// needs. Status is one of the Ext* constants, or a raw status this version
// does not know (which Classify sends to review).
type External struct {
	ProviderID string
	Status     string
	Created    time.Time
}

// Provider reads one payment at the provider. Errors wrap
// ErrProviderUnavailable (the provider could not answer: timeout, 429, 5xx)
// or ErrProviderNotFound (it answered that no such payment exists); any
// other error also counts as unavailable, since it says nothing about the
// payment.
type Provider interface {
	Get(ctx context.Context, providerID string) (External, error)
}

// ListPage is one page of payments created in a window, newest first.
type ListPage struct {
	Items   []External
	HasMore bool
	Next    string // cursor for the next (older) page
}

// Lister lists payments by creation window, up to 100 per call, so one call
// verifies up to 100 rows. Errors are as for Provider.
type Lister interface {
	ListCreated(ctx context.Context, gte, lte time.Time, startingAfter string) (ListPage, error)
}

// ProviderEvent is one of the provider's events, as the heal mode reads
// them. Snapshot is the payment as the event recorded it, when the event
// carries the payment object (payment_intent.* events); events about a
// payment that carry another object (refunds, charges) leave it nil and the
// healer reads the payment itself.
type ProviderEvent struct {
	ID         string
	Type       string
	Created    time.Time
	ProviderID string
	Snapshot   *External
}

// EventPage is one page of provider events, newest first.
type EventPage struct {
	Events  []ProviderEvent
	HasMore bool
	Next    string
}

// EventLister re-reads the provider's events created in [since, until].
// Errors are as for Provider.
type EventLister interface {
	ListEvents(ctx context.Context, since, until time.Time, startingAfter string) (EventPage, error)
}
