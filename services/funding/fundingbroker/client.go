// Package fundingbroker is the HTTP client of the broker API (Alpaca's
// Broker API, or broker-sim standing in for it) as funding-svc uses it:
// cash journals, ACH/wire transfers, funding-wallet transfers and the
// server-sent event streams. It decodes what the broker sends and decides
// nothing.
package fundingbroker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one broker. Its HTTP client's timeout (or the context's
// deadline) bounds every call; streams should use a client without one.
type Client struct {
	BaseURL string
	KeyID   string
	Secret  string
	HTTP    *http.Client
}

// APIError is an answer with a status other than 2xx: the broker's
// {"code", "message"} and the HTTP status.
type APIError struct {
	Status  int
	Code    int    `json:"code"`
	Message string `json:"message"`
	// Reset is X-RateLimit-Reset (unix seconds): when the broker's rate
	// window ends. Zero when the answer carried none.
	Reset time.Time `json:"-"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("broker: %d %d %s", e.Status, e.Code, e.Message)
}

// IsStatus reports whether err is the broker's answer with HTTP status.
func IsStatus(err error, status int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == status
}

// Journal is a cash journal (JNLC) as the broker shows it.
type Journal struct {
	ID          string `json:"id"`
	EntryType   string `json:"entry_type"`
	FromAccount string `json:"from_account"`
	ToAccount   string `json:"to_account"`
	Status      string `json:"status"`
	NetAmount   string `json:"net_amount"`
	Description string `json:"description"`
	Currency    string `json:"currency"`
	CreatedAt   string `json:"created_at"`
}

// Transfer is an ACH or wire transfer.
type Transfer struct {
	ID             string    `json:"id"`
	AccountID      string    `json:"account_id"`
	Type           string    `json:"type"`
	Status         string    `json:"status"`
	Amount         string    `json:"amount"`
	Direction      string    `json:"direction"` // INCOMING | OUTGOING
	RelationshipID string    `json:"relationship_id"`
	Reason         string    `json:"reason"`
	CreatedAt      time.Time `json:"created_at"`
}

// TransferRequest is an ACH transfer to create. Amount in cents;
// Direction INCOMING (a deposit) or OUTGOING (a withdrawal).
type TransferRequest struct {
	RelationshipID string
	Direction      string
	Amount         int64
}

// CreateTransfer is POST /v1/accounts/{account_id}/transfers for an ACH
// transfer. The broker takes no Idempotency-Key here: a retry is a second
// transfer, so a caller that lost the answer must find the first in the
// account's list before calling again.
func (c *Client) CreateTransfer(ctx context.Context, account string, r TransferRequest) (Transfer, error) {
	body := map[string]string{"transfer_type": "ach", "relationship_id": r.RelationshipID, "amount": FormatCents(r.Amount), "direction": r.Direction}
	var t Transfer
	err := c.do(ctx, http.MethodPost, "/v1/accounts/"+url.PathEscape(account)+"/transfers", nil, body, nil, &t)
	return t, err
}

// WalletTransfer is a funding-wallet transfer (v1beta).
type WalletTransfer struct {
	ID          string    `json:"id"`
	AccountID   string    `json:"account_id"`
	Direction   string    `json:"direction"` // incoming | outgoing
	Status      string    `json:"status"`
	TotalAmount string    `json:"total_amount"`
	CreatedAt   time.Time `json:"created_at"`
}

// JournalRequest is a cash journal to create. Amount in cents.
type JournalRequest struct {
	FromAccount string
	ToAccount   string
	Amount      int64
	Description string
}

// CreateJournal is POST /v1/journals with the Idempotency-Key key: the
// same key and body answer the journal the first call created; another
// body under the key is a 422 APIError.
func (c *Client) CreateJournal(ctx context.Context, r JournalRequest, key string) (Journal, error) {
	body := map[string]string{"entry_type": "JNLC", "from_account": r.FromAccount, "to_account": r.ToAccount,
		"amount": FormatCents(r.Amount), "description": r.Description}
	var j Journal
	err := c.do(ctx, http.MethodPost, "/v1/journals", nil, body, map[string]string{"Idempotency-Key": key}, &j)
	return j, err
}

// JournalFilter narrows GET /v1/journals. After is exclusive, on the
// journals' creation dates.
type JournalFilter struct {
	After       time.Time
	Before      time.Time // exclusive, on the creation date
	FromAccount string
	ToAccount   string
}

// ListJournals is GET /v1/journals.
func (c *Client) ListJournals(ctx context.Context, f JournalFilter) ([]Journal, error) {
	q := url.Values{"entry_type": {"JNLC"}}
	if !f.After.IsZero() {
		q.Set("after", f.After.UTC().Format(time.DateOnly))
	}
	if !f.Before.IsZero() {
		q.Set("before", f.Before.UTC().Format(time.DateOnly))
	}
	if f.FromAccount != "" {
		q.Set("from_account", f.FromAccount)
	}
	if f.ToAccount != "" {
		q.Set("to_account", f.ToAccount)
	}
	var out []Journal
	err := c.do(ctx, http.MethodGet, "/v1/journals", q, nil, nil, &out)
	return out, err
}

// GetJournal is GET /v1/journals/{journal_id}.
func (c *Client) GetJournal(ctx context.Context, id string) (Journal, error) {
	var j Journal
	err := c.do(ctx, http.MethodGet, "/v1/journals/"+url.PathEscape(id), nil, nil, nil, &j)
	return j, err
}

// ListTransfers is GET /v1/accounts/{account_id}/transfers: the only way
// to read a transfer, there being no GET by id.
func (c *Client) ListTransfers(ctx context.Context, account string) ([]Transfer, error) {
	var out []Transfer
	err := c.do(ctx, http.MethodGet, "/v1/accounts/"+url.PathEscape(account)+"/transfers", nil, nil, nil, &out)
	return out, err
}

// ListTransfersPage is one page of GET /v1/accounts/{account_id}/transfers,
// newest first.
func (c *Client) ListTransfersPage(ctx context.Context, account string, limit, offset int) ([]Transfer, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
	var out []Transfer
	err := c.do(ctx, http.MethodGet, "/v1/accounts/"+url.PathEscape(account)+"/transfers", q, nil, nil, &out)
	return out, err
}

// ListWalletTransfers is GET /v1beta/accounts/{account_id}/funding_wallet/transfers.
func (c *Client) ListWalletTransfers(ctx context.Context, account string) ([]WalletTransfer, error) {
	var out []WalletTransfer
	err := c.do(ctx, http.MethodGet, "/v1beta/accounts/"+url.PathEscape(account)+"/funding_wallet/transfers", nil, nil, nil, &out)
	return out, err
}

// GetWalletTransfer is GET /v1beta/accounts/{account_id}/funding_wallet/transfers/{transfer_id}.
func (c *Client) GetWalletTransfer(ctx context.Context, account, id string) (WalletTransfer, error) {
	var w WalletTransfer
	err := c.do(ctx, http.MethodGet, "/v1beta/accounts/"+url.PathEscape(account)+"/funding_wallet/transfers/"+url.PathEscape(id), nil, nil, nil, &w)
	return w, err
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any, header map[string]string, out any) error {
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		ae := &APIError{Status: res.StatusCode, Reset: reset(res.Header)}
		_ = json.Unmarshal(b, ae)
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("broker: %s %s: %w", method, path, err)
	}
	return nil
}

func (c *Client) request(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	u := strings.TrimSuffix(c.BaseURL, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.KeyID, c.Secret)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// Stream reads the SSE stream at path from after the event id sinceID
// ("" reads only what happens after connecting, which callers that must
// not miss anything never ask for), calling each with every data line's
// JSON until the stream ends, ctx ends, or each fails. A stream the
// broker ends cleanly returns nil.
func (c *Client) Stream(ctx context.Context, path, sinceID string, each func(data []byte) error) error {
	q := url.Values{}
	if sinceID != "" {
		q.Set("since_id", sinceID)
	}
	return c.stream(ctx, path, q, each)
}

// Replay reads the SSE stream at path for the business times [since,
// until): a bounded replay, which the broker ends (200) once nothing more
// can fall inside it.
func (c *Client) Replay(ctx context.Context, path string, since, until time.Time, each func(data []byte) error) error {
	q := url.Values{"since": {since.UTC().Format(time.RFC3339Nano)}, "until": {until.UTC().Format(time.RFC3339Nano)}}
	return c.stream(ctx, path, q, each)
}

func (c *Client) stream(ctx context.Context, path string, q url.Values, each func(data []byte) error) error {
	req, err := c.request(ctx, http.MethodGet, path, q, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	res, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		ae := &APIError{Status: res.StatusCode, Reset: reset(res.Header)}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
		_ = json.Unmarshal(b, ae)
		return ae
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // comments (heartbeats, "reading too slowly"), blank separators
		}
		if err := each(bytes.TrimSpace(data)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return nil
}

// reset is the answer's X-RateLimit-Reset, zero when absent or unreadable.
func reset(h http.Header) time.Time {
	n, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// ParseCents reads a decimal amount string ("25.00", "7.5", "3") as cents.
func ParseCents(s string) (int64, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 2 {
		return 0, fmt.Errorf("amount %q", s)
	}
	frac += strings.Repeat("0", 2-len(frac))
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", s, err)
	}
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", s, err)
	}
	c := w*100 + f
	if neg {
		c = -c
	}
	return c, nil
}

// FormatCents writes cents as the broker's decimal string ("25.00").
func FormatCents(c int64) string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}
