package paymentprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v84"
	"github.com/stripe/stripe-go/v84/webhook"
)

// WebhookTolerance is how old a webhook's signed timestamp may be.
// Older deliveries are rejected as possible replays.
const WebhookTolerance = 5 * time.Minute

// Event is a provider event reduced to what our consumers use. PaymentID is
// the PaymentIntent the event concerns (for payment_intent.*, charge.* and
// refund.* events); Payment or Refund holds the object when the event
// carries one.
type Event struct {
	ID        string
	Type      string
	Created   time.Time
	PaymentID string
	Payment   *Payment
	Refund    *Refund
}

// Verify checks a webhook's Stripe-Signature header with stripe-go's
// webhook package (HMAC-SHA256, timestamp within WebhookTolerance, API
// version of the SDK's release train) and decodes the event. Any failure
// wraps ErrBadSignature; answer it with 400 so the provider does not
// count it as delivered.
func Verify(payload []byte, header, secret string) (Event, error) {
	ev, err := webhook.ConstructEventWithOptions(payload, header, secret,
		webhook.ConstructEventOptions{Tolerance: WebhookTolerance})
	if err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	// stripe-go bounds only the age of the signed timestamp; one far ahead of
	// our clock would stay replayable until the clock catches up.
	if at, ok := signedAt(header); ok && time.Until(at) > WebhookTolerance {
		return Event{}, fmt.Errorf("%w: %w: signed at %s, more than %s ahead", ErrBadSignature, ErrSignedInTheFuture,
			at.UTC().Format(time.RFC3339), WebhookTolerance)
	}
	out, err := eventFrom(&ev)
	if err != nil {
		return Event{}, fmt.Errorf("%w: event %s: %w", ErrBadSignature, ev.ID, err)
	}
	return out, nil
}

// ErrSignedInTheFuture wraps (under ErrBadSignature) a delivery whose
// signed timestamp is more than WebhookTolerance ahead of our clock.
var ErrSignedInTheFuture = errors.New("timestamp ahead of the clock beyond the tolerance")

// signedAt is the timestamp a Stripe-Signature header signs, read as
// stripe-go reads it: pairs split on ",", the last "t=" wins.
func signedAt(header string) (time.Time, bool) {
	var at time.Time
	ok := false
	for _, pair := range strings.Split(header, ",") {
		parts := strings.Split(pair, "=")
		if len(parts) != 2 || parts[0] != "t" {
			continue
		}
		n, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			return time.Time{}, false
		}
		at, ok = time.Unix(n, 0), true
	}
	return at, ok
}

func eventFrom(ev *stripe.Event) (Event, error) {
	out := Event{ID: ev.ID, Type: string(ev.Type), Created: time.Unix(ev.Created, 0).UTC()}
	if ev.Data == nil {
		return out, nil
	}
	switch {
	case strings.HasPrefix(out.Type, "payment_intent."):
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
			return out, fmt.Errorf("decoding payment_intent: %w", err)
		}
		p := paymentFrom(&pi)
		out.Payment, out.PaymentID = &p, p.ProviderID
	case strings.HasPrefix(out.Type, "refund."):
		var r stripe.Refund
		if err := json.Unmarshal(ev.Data.Raw, &r); err != nil {
			return out, fmt.Errorf("decoding refund: %w", err)
		}
		rf := refundFrom(&r)
		out.Refund, out.PaymentID = &rf, rf.PaymentID
	case strings.HasPrefix(out.Type, "charge."):
		var ch stripe.Charge
		if err := json.Unmarshal(ev.Data.Raw, &ch); err != nil {
			return out, fmt.Errorf("decoding charge: %w", err)
		}
		if ch.PaymentIntent != nil {
			out.PaymentID = ch.PaymentIntent.ID
		}
	}
	return out, nil
}

// GetEvent reads one event by id; an unknown id is ErrNotFound.
func (c *Client) GetEvent(ctx context.Context, id string) (Event, error) {
	ev, err := c.sc.V1Events.Retrieve(ctx, id, nil)
	if err != nil {
		return Event{}, fmt.Errorf("paymentprovider: get event %s: %w", id, classify(err))
	}
	out, err := eventFrom(ev)
	if err != nil {
		return Event{}, fmt.Errorf("paymentprovider: get event %s: %w", id, err)
	}
	return out, nil
}

// ListEvents returns one page (up to 100) of events created in [since,
// until] (whole seconds), newest first, after the cursor startingAfter.
// Events are the provider's record of every state change, including those
// whose webhooks were lost.
func (c *Client) ListEvents(ctx context.Context, since, until time.Time, startingAfter string) (Page[Event], error) {
	params := &stripe.EventListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: since.Unix(), LesserThanOrEqual: until.Unix()}}
	params.Limit = stripe.Int64(100)
	if startingAfter != "" {
		params.StartingAfter = stripe.String(startingAfter)
	}
	var page struct {
		stripe.APIResource
		stripe.ListMeta
		Data []*stripe.Event `json:"data"`
	}
	if err := c.list(ctx, "/v1/events", &params.ListParams, params, &page); err != nil {
		return Page[Event]{}, fmt.Errorf("paymentprovider: list events %s..%s after %q: %w",
			since.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339), startingAfter, err)
	}
	out := Page[Event]{HasMore: page.HasMore, Items: make([]Event, 0, len(page.Data))}
	for _, ev := range page.Data {
		e, err := eventFrom(ev)
		if err != nil {
			return Page[Event]{}, fmt.Errorf("paymentprovider: list events: event %s: %w", ev.ID, err)
		}
		out.Items = append(out.Items, e)
	}
	if out.HasMore && len(out.Items) > 0 {
		out.Next = out.Items[len(out.Items)-1].ID
	}
	return out, nil
}
