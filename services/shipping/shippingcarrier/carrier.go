// Package shippingcarrier is the shipping service's gateway to the parcel
// carrier's label API (carrier-sim in development and tests): create a
// shipment under an idempotency key, look a key up, read and cancel a
// shipment. It sorts every answer into what the caller branches on: a
// shipment, a decline, a refusal that retrying cannot fix, or no answer
// (ErrUnavailable) after which the shipment may or may not exist.
package shippingcarrier

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/concordhq/concord/services/shipping"
)

// Errors callers branch on.
var (
	// ErrUnavailable: no answer, a 5xx or a 429. The call may have taken
	// effect; look the key up before calling again.
	ErrUnavailable = errors.New("carrier unavailable")
	// ErrNotFound: the carrier does not know the shipment.
	ErrNotFound = errors.New("carrier: no such shipment")
	// ErrShipped: the shipment left and cannot be cancelled.
	ErrShipped = errors.New("carrier: shipment already shipped")
	// ErrRefused: the carrier refused the request itself (4xx other than
	// a decline); retrying the same request cannot help.
	ErrRefused = errors.New("carrier refused the request")
)

// DeclinedError is the carrier's refusal to ship a parcel (an address it
// cannot deliver to, a postal code it does not serve).
type DeclinedError struct {
	Code, Param, Message string
}

func (e *DeclinedError) Error() string {
	return fmt.Sprintf("carrier declined the shipment: %s (%s): %s", e.Code, e.Param, e.Message)
}

// Shipment is the carrier's view of a shipment.
type Shipment struct {
	ID             string `json:"id"`
	Status         string `json:"status"`
	TrackingNumber string `json:"tracking_number"`
	IdempotencyKey string `json:"idempotency_key"`
}

// Carrier statuses.
const (
	StatusCreated   = "created"
	StatusShipped   = "shipped"
	StatusCancelled = "cancelled"
)

// Config configures a Client.
type Config struct {
	// BaseURL is the carrier API's root (carrier-sim: http://127.0.0.1:12112).
	BaseURL string
	// APIKey is sent as a bearer token when set.
	APIKey string
	// Timeout bounds one call (default 5s): past it the answer counts as
	// lost and the shipment is looked up by key before any new call.
	Timeout time.Duration
	// HTTPClient overrides the transport (its Timeout is replaced).
	HTTPClient *http.Client
}

// Client talks to the carrier. It is safe for concurrent use.
type Client struct {
	base string // without a trailing slash
	key  string
	http *http.Client
}

// New checks cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("carrier URL %q: want an http(s) URL", cfg.BaseURL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	hc := &http.Client{Timeout: cfg.Timeout}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		c.Timeout = cfg.Timeout
		hc = &c
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), key: cfg.APIKey, http: hc}, nil
}

type createBody struct {
	OrderID   string           `json:"order_id"`
	Reference string           `json:"reference,omitempty"`
	Address   shipping.Address `json:"address"`
	Items     []shipping.Item  `json:"items"`
}

// Create asks the carrier to ship p under key. The same key with the same
// parcel returns the shipment the first call created.
func (c *Client) Create(ctx context.Context, key, reference string, p shipping.Parcel) (Shipment, error) {
	b, err := json.Marshal(createBody{OrderID: p.OrderID, Reference: reference, Address: p.Address, Items: p.Items})
	if err != nil {
		return Shipment{}, fmt.Errorf("encode shipment of order %s: %w", p.OrderID, err)
	}
	var sh Shipment
	err = c.do(ctx, http.MethodPost, "/v1/shipments", key, b, &sh)
	return sh, err
}

// Lookup returns the shipment key created, if any.
func (c *Client) Lookup(ctx context.Context, key string) (sh Shipment, found bool, err error) {
	var list struct {
		Data []Shipment `json:"data"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/shipments?idempotency_key="+url.QueryEscape(key), "", nil, &list); err != nil {
		return Shipment{}, false, err
	}
	for _, s := range list.Data {
		if s.IdempotencyKey == key {
			return s, true, nil
		}
	}
	return Shipment{}, false, nil
}

// Get reads one shipment.
func (c *Client) Get(ctx context.Context, id string) (Shipment, error) {
	var sh Shipment
	err := c.do(ctx, http.MethodGet, "/v1/shipments/"+url.PathEscape(id), "", nil, &sh)
	return sh, err
}

// Cancel voids a shipment; cancelling a cancelled one is a success.
func (c *Client) Cancel(ctx context.Context, id string) (Shipment, error) {
	var sh Shipment
	err := c.do(ctx, http.MethodPost, "/v1/shipments/"+url.PathEscape(id)+"/cancel", "", nil, &sh)
	return sh, err
}

type apiError struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Param   string `json:"param"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *Client) do(ctx context.Context, method, path, key string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("carrier %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %s %s: %v", ErrUnavailable, method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%w: %s %s: reading answer: %v", ErrUnavailable, method, path, err)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%w: %s %s: answer is not JSON: %v", ErrUnavailable, method, path, err)
		}
		return nil
	}
	var ae apiError
	_ = json.Unmarshal(raw, &ae)
	e := ae.Error
	switch {
	case res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("%w: %s %s: %d %s", ErrUnavailable, method, path, res.StatusCode, e.Message)
	case res.StatusCode == http.StatusUnprocessableEntity && e.Type == "shipment_declined":
		return &DeclinedError{Code: e.Code, Param: e.Param, Message: e.Message}
	case res.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s %s: %s", ErrNotFound, method, path, e.Message)
	case res.StatusCode == http.StatusConflict && e.Code == "shipment_already_shipped":
		return fmt.Errorf("%w: %s", ErrShipped, e.Message)
	}
	return fmt.Errorf("%w: %s %s: %d %s/%s (%s): %s", ErrRefused, method, path, res.StatusCode, e.Type, e.Code, e.Param, e.Message)
}
