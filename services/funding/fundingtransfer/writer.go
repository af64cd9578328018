// Package fundingtransfer is the WRITE layer for ACH transfers: deposits
// (INCOMING) and withdrawals (OUTGOING) between a customer's bank and
// their account. The broker takes no Idempotency-Key on transfers, so a
// retry is a second transfer unless the first is found: the intent row is
// written before the call, and a call whose outcome is unknown is looked
// for in the account's transfer list — the same direction and amount,
// created since the intent, not yet any other movement's — before it is
// made again. Two candidates are not guessed between: the intent goes to
// review and nothing is called.
package fundingtransfer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingstore"
)

// Errors callers branch on.
var (
	// ErrUnknownOutcome: the call may or may not have created the
	// transfer; the next Submit of the request looks before calling.
	ErrUnknownOutcome = errors.New("broker outcome unknown")
	// ErrAmbiguous: several of the account's transfers could be the one
	// the intent's lost call created; a person decides.
	ErrAmbiguous = errors.New("several broker transfers match the intent")
)

// ReasonAmbiguous is the review reason of an ambiguous lookup.
const ReasonAmbiguous = "ambiguous_transfer"

// Request is one ACH transfer a caller asks for; the same RequestID is
// the same transfer.
type Request struct {
	RequestID      string
	AccountID      string
	RelationshipID string
	Direction      fundingstore.Direction // Credit: INCOMING, Debit: OUTGOING
	Amount         int64
}

// Key derives the intent key of r (at most 128 characters).
func Key(r Request) string {
	s := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s", r.AccountID, r.Direction, r.RequestID))
	return "ach-" + string(r.Direction) + "-" + hex.EncodeToString(s[:20])
}

// Writer submits ACH transfers.
type Writer struct {
	Store  *fundingstore.Store
	Broker *fundingbroker.Client
	// Skew is how much earlier than the intent the broker's clock may
	// date the transfer (a minute if zero).
	Skew time.Duration
}

func brokerDirection(d fundingstore.Direction) string {
	if d == fundingstore.Debit {
		return "OUTGOING"
	}
	return "INCOMING"
}

// Submit makes sure the transfer of r exists at the broker and returns its
// movement (PENDING at least, with the broker's id).
func (w *Writer) Submit(ctx context.Context, r Request) (fundingstore.Movement, error) {
	m, created, err := w.Store.Intend(ctx, fundingstore.Movement{Domain: funding.Transfer, IntentKey: Key(r),
		AccountID: r.AccountID, Direction: r.Direction, Amount: r.Amount, Currency: "USD"})
	if err != nil {
		return fundingstore.Movement{}, err
	}
	if m.BrokerID != "" {
		return m, nil
	}
	if !created {
		t, found, err := w.lookup(ctx, m)
		switch {
		case errors.Is(err, ErrAmbiguous):
			if rerr := w.Store.Review(ctx, fundingstore.News{Domain: funding.Transfer, IntentKey: m.IntentKey, Source: "write"}, ReasonAmbiguous); rerr != nil {
				return fundingstore.Movement{}, rerr
			}
			return fundingstore.Movement{}, fmt.Errorf("intent %s: %w", m.IntentKey, err)
		case err != nil:
			return fundingstore.Movement{}, fmt.Errorf("look up intent %s: %w", m.IntentKey, errors.Join(ErrUnknownOutcome, err))
		case found:
			return w.Store.Accepted(ctx, m.IntentKey, t.ID)
		}
	}
	t, err := w.Broker.CreateTransfer(ctx, r.AccountID, fundingbroker.TransferRequest{RelationshipID: r.RelationshipID,
		Direction: brokerDirection(r.Direction), Amount: r.Amount})
	var ae *fundingbroker.APIError
	switch {
	case err == nil:
		return w.Store.Accepted(ctx, m.IntentKey, t.ID)
	case errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusTooManyRequests:
		return fundingstore.Movement{}, fmt.Errorf("intent %s: %w", m.IntentKey, err)
	default:
		return fundingstore.Movement{}, fmt.Errorf("intent %s: %w", m.IntentKey, errors.Join(ErrUnknownOutcome, err))
	}
}

// lookup finds the transfer m's lost call created: the account's
// transfers of m's direction and amount, created since m (less the skew),
// that no other intent holds. A transfer a stream mirrored before the
// answer (no intent key) still counts: Accepted folds it in.
func (w *Writer) lookup(ctx context.Context, m fundingstore.Movement) (fundingbroker.Transfer, bool, error) {
	skew := w.Skew
	if skew <= 0 {
		skew = time.Minute
	}
	ts, err := w.Broker.ListTransfers(ctx, m.AccountID)
	if err != nil {
		return fundingbroker.Transfer{}, false, err
	}
	var match []fundingbroker.Transfer
	for _, t := range ts {
		cents, err := fundingbroker.ParseCents(t.Amount)
		if err != nil || cents != m.Amount || !strings.EqualFold(t.Direction, brokerDirection(m.Direction)) || t.CreatedAt.Before(m.CreatedAt.Add(-skew)) {
			continue
		}
		local, err := w.Store.ByBrokerID(ctx, funding.Transfer, t.ID)
		switch {
		case errors.Is(err, fundingstore.ErrNotFound):
		case err != nil:
			return fundingbroker.Transfer{}, false, err
		case local.IntentKey != "":
			continue // another intent's
		}
		match = append(match, t)
	}
	switch len(match) {
	case 0:
		return fundingbroker.Transfer{}, false, nil
	case 1:
		return match[0], true, nil
	default:
		return fundingbroker.Transfer{}, false, fmt.Errorf("%d transfers: %w", len(match), ErrAmbiguous)
	}
}
