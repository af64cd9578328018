package paymentprovider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v84"
	"github.com/stripe/stripe-go/v84/form"
)

// CreateAndConfirm creates a PaymentIntent and confirms it in one call,
// with in.IdempotencyKey as the Idempotency-Key, so calling it again for
// the same intent (after a timeout, a crash, a redelivered command)
// returns the same PaymentIntent instead of charging twice.
//
// A decline returns the payment with StatusDeclined and a nil error. A
// payment may also come back StatusProcessing; its outcome arrives later
// as a webhook or through Get. On ErrUnavailable the charge may or may not
// exist: call again with the same key.
func (c *Client) CreateAndConfirm(ctx context.Context, in Intent) (Payment, error) {
	return c.createAndConfirm(ctx, in, false)
}

// Authorize places an authorization hold: a PaymentIntent with
// capture_method=manual, created and confirmed in one call with
// in.IdempotencyKey, that comes back StatusAuthorized (Stripe's
// requires_capture) until Capture takes it, CancelHold releases it, or it
// expires at the provider (then StatusCanceled). Declines and errors are
// reported as by CreateAndConfirm: a decline is StatusDeclined with a nil
// error; on ErrUnavailable the hold may or may not exist, so call again
// with the same key.
func (c *Client) Authorize(ctx context.Context, in Intent) (Payment, error) {
	return c.createAndConfirm(ctx, in, true)
}

func (c *Client) createAndConfirm(ctx context.Context, in Intent, manual bool) (Payment, error) {
	if in.IdempotencyKey == "" {
		return Payment{}, fmt.Errorf("%w: create payment: an idempotency key is required", ErrInvalidRequest)
	}
	params := &stripe.PaymentIntentCreateParams{
		Amount:        stripe.Int64(in.Amount),
		Currency:      stripe.String(in.Currency),
		PaymentMethod: stripe.String(in.PaymentMethod),
		Confirm:       stripe.Bool(true),
	}
	if manual {
		params.CaptureMethod = stripe.String(string(stripe.PaymentIntentCaptureMethodManual))
	}
	if in.Description != "" {
		params.Description = stripe.String(in.Description)
	}
	for k, v := range in.Metadata {
		params.AddMetadata(k, v)
	}
	params.SetIdempotencyKey(in.IdempotencyKey)
	pi, err := c.sc.V1PaymentIntents.Create(ctx, params)
	if err != nil {
		var se *stripe.Error
		if errors.As(err, &se) && se.Type == stripe.ErrorTypeCard {
			if se.PaymentIntent != nil {
				return paymentFrom(se.PaymentIntent), nil
			}
			return Payment{Status: StatusDeclined, ProviderStatus: string(stripe.PaymentIntentStatusRequiresPaymentMethod),
				Amount: in.Amount, Currency: in.Currency, Metadata: in.Metadata,
				DeclineCode: string(se.DeclineCode), DeclineMessage: se.Msg}, nil
		}
		return Payment{}, fmt.Errorf("paymentprovider: create payment (idempotency key %s): %w", in.IdempotencyKey, classify(err))
	}
	return paymentFrom(pi), nil
}

// Get reads one PaymentIntent with its charge, so refunds show in
// AmountRefunded and StatusRefunded. An unknown id is ErrNotFound.
func (c *Client) Get(ctx context.Context, providerID string) (Payment, error) {
	params := &stripe.PaymentIntentRetrieveParams{}
	params.AddExpand("latest_charge")
	pi, err := c.sc.V1PaymentIntents.Retrieve(ctx, providerID, params)
	if err != nil {
		return Payment{}, fmt.Errorf("paymentprovider: get payment %s: %w", providerID, classify(err))
	}
	return paymentFrom(pi), nil
}

// ListCreated returns one page of PaymentIntents created in [gte, lte]
// (whole seconds), newest first, after the cursor startingAfter (empty for
// the first page). limit is 1..100 (0 means 100). Following Next until
// HasMore is false visits every payment in the window exactly once, even
// while new payments are created.
func (c *Client) ListCreated(ctx context.Context, gte, lte time.Time, startingAfter string, limit int) (Page[Payment], error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > 100 {
		return Page[Payment]{}, fmt.Errorf("%w: list payments: limit %d outside 1..100", ErrInvalidRequest, limit)
	}
	params := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: gte.Unix(), LesserThanOrEqual: lte.Unix()}}
	params.Limit = stripe.Int64(int64(limit))
	if startingAfter != "" {
		params.StartingAfter = stripe.String(startingAfter)
	}
	params.AddExpand("data.latest_charge")
	var page struct {
		stripe.APIResource
		stripe.ListMeta
		Data []*stripe.PaymentIntent `json:"data"`
	}
	if err := c.list(ctx, "/v1/payment_intents", &params.ListParams, params, &page); err != nil {
		return Page[Payment]{}, fmt.Errorf("paymentprovider: list payments created %s..%s after %q: %w",
			gte.UTC().Format(time.RFC3339), lte.UTC().Format(time.RFC3339), startingAfter, err)
	}
	out := Page[Payment]{HasMore: page.HasMore, Items: make([]Payment, 0, len(page.Data))}
	for _, pi := range page.Data {
		out.Items = append(out.Items, paymentFrom(pi))
	}
	if out.HasMore && len(out.Items) > 0 {
		out.Next = out.Items[len(out.Items)-1].ProviderID
	}
	return out, nil
}

// list fetches exactly one page. stripe-go's List iterators page on their
// own and hide has_more, which a resumable sweep needs, so this calls the
// SDK's backend with the SDK's own form encoding.
func (c *Client) list(ctx context.Context, path string, lp *stripe.ListParams, params stripe.ListParamsContainer, into stripe.LastResponseSetter) error {
	lp.Context = ctx
	var body form.Values
	form.AppendTo(&body, params)
	if err := c.backend.CallRaw(http.MethodGet, path, c.key, []byte(body.Encode()), lp.GetParams(), into); err != nil {
		return classify(err)
	}
	return nil
}

// Refund refunds what is left of a succeeded payment, with idemKey as the
// Idempotency-Key (derive it from the stored refund request). Refunding a
// payment that is not succeeded, or already refunded, is
// ErrInvalidRequest; an unknown payment is ErrInvalidRequest too, since
// Stripe reports it as a bad parameter.
func (c *Client) Refund(ctx context.Context, providerID, idemKey string) (Refund, error) {
	if idemKey == "" {
		return Refund{}, fmt.Errorf("%w: refund %s: an idempotency key is required", ErrInvalidRequest, providerID)
	}
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(providerID)}
	params.SetIdempotencyKey(idemKey)
	r, err := c.sc.V1Refunds.Create(ctx, params)
	if err != nil {
		return Refund{}, fmt.Errorf("paymentprovider: refund %s (idempotency key %s): %w", providerID, idemKey, classify(err))
	}
	return refundFrom(r), nil
}

// Capture takes an authorization hold: all of it when amount is 0, else
// amount of it (the rest is released), with idemKey as the
// Idempotency-Key, so a retry after a timeout returns the capture that
// happened instead of failing on a spent hold. A hold that expired at the
// provider is ErrHoldExpired; one in any other state than authorized
// (captured with another key, canceled) is ErrInvalidRequest.
func (c *Client) Capture(ctx context.Context, providerID string, amount int64, idemKey string) (Payment, error) {
	if idemKey == "" {
		return Payment{}, fmt.Errorf("%w: capture %s: an idempotency key is required", ErrInvalidRequest, providerID)
	}
	if amount < 0 {
		return Payment{}, fmt.Errorf("%w: capture %s: amount %d is negative", ErrInvalidRequest, providerID, amount)
	}
	params := &stripe.PaymentIntentCaptureParams{}
	if amount > 0 {
		params.AmountToCapture = stripe.Int64(amount)
	}
	params.AddExpand("latest_charge")
	params.SetIdempotencyKey(idemKey)
	pi, err := c.sc.V1PaymentIntents.Capture(ctx, providerID, params)
	if err != nil {
		return Payment{}, fmt.Errorf("paymentprovider: capture %s (idempotency key %s): %w", providerID, idemKey, classify(err))
	}
	return paymentFrom(pi), nil
}

// CancelHold releases an authorization hold that was not captured, with
// idemKey as the Idempotency-Key; the payment comes back StatusCanceled.
// Canceling a payment that is no longer cancelable (captured, already
// canceled with another key, expired) is ErrInvalidRequest: read it with
// Get to see which.
func (c *Client) CancelHold(ctx context.Context, providerID, idemKey string) (Payment, error) {
	if idemKey == "" {
		return Payment{}, fmt.Errorf("%w: cancel hold %s: an idempotency key is required", ErrInvalidRequest, providerID)
	}
	params := &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String(string(stripe.PaymentIntentCancellationReasonAbandoned))}
	params.AddExpand("latest_charge")
	params.SetIdempotencyKey(idemKey)
	pi, err := c.sc.V1PaymentIntents.Cancel(ctx, providerID, params)
	if err != nil {
		return Payment{}, fmt.Errorf("paymentprovider: cancel hold %s (idempotency key %s): %w", providerID, idemKey, classify(err))
	}
	return paymentFrom(pi), nil
}
