// Package paymentprovider is the payment service's gateway to its payment
// provider: Stripe, or provider-sim speaking the same API. It is written
// against the official SDK (stripe-go) and reduces Stripe's many outcomes to
// the few the payment service and the reconciler branch on:
//
//   - ErrUnavailable: timeouts, transport errors, 429 and 5xx. The call may
//     or may not have taken effect; retry with the same idempotency key.
//   - ErrNotFound: the provider has no such object (resource_missing).
//   - ErrIdempotencyConflict: the key was already used with other
//     parameters; a bug in how keys are derived, never retry.
//   - ErrInvalidRequest: any other refusal (4xx); retrying will not help.
//   - ErrHoldExpired: a capture came after the authorization hold expired
//     at the provider; nothing was captured and nothing ever will be.
//   - A card decline is not an error: CreateAndConfirm and Authorize return
//     the payment with StatusDeclined.
//
// Every write carries an Idempotency-Key the caller derived from its own
// stored intent; the gateway refuses to write without one.
package paymentprovider

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v84"

	"github.com/concordhq/concord/infra/kit"
)

// Sentinel errors callers branch on; returned errors wrap them with %w.
var (
	ErrUnavailable         = errors.New("paymentprovider: provider unavailable")
	ErrNotFound            = errors.New("paymentprovider: not found")
	ErrIdempotencyConflict = errors.New("paymentprovider: idempotency key reused with other parameters")
	ErrInvalidRequest      = errors.New("paymentprovider: invalid request")
	ErrBadSignature        = errors.New("paymentprovider: webhook signature rejected")
	ErrHoldExpired         = errors.New("paymentprovider: authorization hold expired")
)

// Config says where the provider is and how to reach it.
type Config struct {
	// APIKey is the secret key (sk_test_… for Stripe's test mode).
	APIKey string
	// BaseURL is the API's base URL; empty means Stripe itself
	// (https://api.stripe.com). Point it at provider-sim for local runs.
	BaseURL string
	// Timeout bounds one HTTP attempt (default 10s). The caller's context
	// bounds the whole call, retries included.
	Timeout time.Duration
	// MaxNetworkRetries is how often stripe-go itself retries a call that
	// failed with a transport error, 409 or 5xx, reusing the same
	// Idempotency-Key (default 0: the caller owns retries).
	MaxNetworkRetries int64
	// Connections is how many calls the caller makes at once (default 16).
	// That many idle connections are kept open: Go's default keeps two per
	// host, so every other concurrent call would open (and, against
	// Stripe, handshake TLS for) a connection of its own and close it.
	Connections int
	// HTTPClient overrides the HTTP client (then Timeout and Connections
	// are ignored).
	HTTPClient *http.Client
}

// Client is the gateway. It is safe for concurrent use.
type Client struct {
	sc      *stripe.Client
	backend stripe.Backend
	key     string
}

// New builds a gateway. It fails without an API key.
func New(cfg Config) (*Client, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("paymentprovider: an API key is required")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 16
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.Connections
		tr.MaxIdleConns = max(tr.MaxIdleConns, cfg.Connections)
		hc = &http.Client{Timeout: cfg.Timeout, Transport: kit.HTTPTransport(tr)}
	}
	bc := &stripe.BackendConfig{
		HTTPClient:        hc,
		MaxNetworkRetries: stripe.Int64(cfg.MaxNetworkRetries),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.BaseURL != "" {
		bc.URL = stripe.String(cfg.BaseURL)
	}
	backends := stripe.NewBackendsWithConfig(bc)
	return &Client{sc: stripe.NewClient(cfg.APIKey, stripe.WithBackends(backends)), backend: backends.API, key: cfg.APIKey}, nil
}

// Status is a payment's state as the payment service sees it.
type Status string

// Statuses. Pending covers Stripe's requires_* states but
// requires_capture, which is Authorized: a hold waiting to be captured or
// released. Refunded means the whole amount came back (a partial refund
// stays Succeeded with AmountRefunded set).
const (
	StatusPending    Status = "pending"
	StatusAuthorized Status = "authorized"
	StatusProcessing Status = "processing"
	StatusSucceeded  Status = "succeeded"
	StatusDeclined   Status = "declined"
	StatusCanceled   Status = "canceled"
	StatusRefunded   Status = "refunded"
	StatusUnknown    Status = "unknown"
)

// StatusOf maps a PaymentIntent's provider status to ours. declined says
// whether the intent carries a last_payment_error; amountRefunded is its
// charge's refunded amount.
func StatusOf(providerStatus string, declined bool, amount, amountRefunded int64) Status {
	switch stripe.PaymentIntentStatus(providerStatus) {
	case stripe.PaymentIntentStatusSucceeded:
		if amount > 0 && amountRefunded >= amount {
			return StatusRefunded
		}
		return StatusSucceeded
	case stripe.PaymentIntentStatusProcessing:
		return StatusProcessing
	case stripe.PaymentIntentStatusRequiresPaymentMethod:
		if declined {
			return StatusDeclined
		}
		return StatusPending
	case stripe.PaymentIntentStatusRequiresConfirmation, stripe.PaymentIntentStatusRequiresAction:
		return StatusPending
	case stripe.PaymentIntentStatusRequiresCapture:
		return StatusAuthorized
	case stripe.PaymentIntentStatusCanceled:
		return StatusCanceled
	}
	return StatusUnknown
}

// Final reports whether a status will not change by itself. Succeeded is
// not final: a refund or a late reversal may still move it to Refunded.
func (s Status) Final() bool {
	return s == StatusDeclined || s == StatusCanceled || s == StatusRefunded
}

// Intent is what we ask the provider to charge. IdempotencyKey must come
// from our stored payment row so that a retry of the same payment, from any
// process, sends the same key.
type Intent struct {
	IdempotencyKey string
	Amount         int64
	Currency       string
	PaymentMethod  string
	Description    string
	Metadata       map[string]string
}

// Payment is the provider's view of one PaymentIntent. For a hold,
// AmountCapturable is what can still be captured and AmountReceived what
// was; AmountRefunded (from the charge) includes what a partial capture,
// a cancel or an expiry released, as Stripe reports it.
type Payment struct {
	ProviderID         string
	Status             Status
	ProviderStatus     string
	Amount             int64
	AmountCapturable   int64
	AmountReceived     int64
	ManualCapture      bool
	CancellationReason string
	AmountRefunded     int64
	Currency           string
	Metadata           map[string]string
	Created            time.Time
	DeclineCode        string
	DeclineMessage     string
}

// Refund is the provider's view of one refund.
type Refund struct {
	ID        string
	PaymentID string
	Amount    int64
	Currency  string
	Status    string
	Created   time.Time
}

// Page is one page of a list, newest first. Next is the cursor for the
// following (older) page; it is empty when HasMore is false.
type Page[T any] struct {
	Items   []T
	HasMore bool
	Next    string
}

func paymentFrom(pi *stripe.PaymentIntent) Payment {
	p := Payment{ProviderID: pi.ID, ProviderStatus: string(pi.Status), Amount: pi.Amount,
		AmountCapturable: pi.AmountCapturable, AmountReceived: pi.AmountReceived,
		ManualCapture: pi.CaptureMethod == stripe.PaymentIntentCaptureMethodManual, CancellationReason: string(pi.CancellationReason),
		Currency: string(pi.Currency), Metadata: pi.Metadata, Created: time.Unix(pi.Created, 0).UTC()}
	if pi.LatestCharge != nil {
		p.AmountRefunded = pi.LatestCharge.AmountRefunded
	}
	if e := pi.LastPaymentError; e != nil {
		p.DeclineCode = string(e.DeclineCode)
		if p.DeclineCode == "" {
			p.DeclineCode = string(e.Code)
		}
		p.DeclineMessage = e.Msg
	}
	p.Status = StatusOf(p.ProviderStatus, pi.LastPaymentError != nil, p.Amount, p.AmountRefunded)
	return p
}

func refundFrom(r *stripe.Refund) Refund {
	out := Refund{ID: r.ID, Amount: r.Amount, Currency: string(r.Currency), Status: string(r.Status),
		Created: time.Unix(r.Created, 0).UTC()}
	if r.PaymentIntent != nil {
		out.PaymentID = r.PaymentIntent.ID
	}
	return out
}

// classify wraps a stripe-go error in the sentinel callers branch on,
// keeping the original (with its request id) in the chain.
func classify(err error) error {
	var se *stripe.Error
	if errors.As(err, &se) {
		switch {
		case se.HTTPStatusCode == http.StatusTooManyRequests, se.HTTPStatusCode >= 500,
			se.HTTPStatusCode == http.StatusConflict:
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		case se.Code == stripe.ErrorCodeChargeExpiredForCapture:
			return fmt.Errorf("%w: %w", ErrHoldExpired, err)
		case se.Type == stripe.ErrorTypeIdempotency:
			return fmt.Errorf("%w: %w", ErrIdempotencyConflict, err)
		case se.Code == stripe.ErrorCodeResourceMissing && se.HTTPStatusCode == http.StatusNotFound:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		default:
			return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
		}
	}
	// Everything that is not an answer from the provider (timeouts,
	// refused connections, a cancelled context, a garbled body) leaves the
	// outcome unknown.
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
