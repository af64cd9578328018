package fundingbroker

import (
	"context"
	"net/http"
	"net/url"
)

// Cash is the account's cash in cents, from GET
// /v1/trading/accounts/{account_id}/account: the balance the broker holds,
// which a local projection of the account's movements must equal.
func (c *Client) Cash(ctx context.Context, account string) (int64, error) {
	var a struct {
		Cash string `json:"cash"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/trading/accounts/"+url.PathEscape(account)+"/account", nil, nil, nil, &a); err != nil {
		return 0, err
	}
	return ParseCents(a.Cash)
}

// ReplayIDs reads the events of the stream at path with ids in
// (sinceID, untilID), calling each with every data line's JSON: a bounded
// replay by cursor, which the broker ends with 200 once nothing more can
// fall inside the window.
func (c *Client) ReplayIDs(ctx context.Context, path, sinceID, untilID string, each func(data []byte) error) error {
	return c.stream(ctx, path, url.Values{"since_id": {sinceID}, "until_id": {untilID}}, each)
}
