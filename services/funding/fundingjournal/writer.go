// Package fundingjournal moves a customer's money with cash journals
// (JNLC) between the firm's account and the customer's: a deposit is a
// journal from the firm, a withdrawal a journal to it. It is the WRITE
// layer of the broker rail: the intent row with a key derived from the
// business request is written before the broker is called, the call
// carries that key as its Idempotency-Key (and as the journal's
// description, which is what a list can be searched by), and the broker's
// id is stored as soon as it answers. A call whose outcome is unknown — a
// timeout, a dropped connection, a 5xx — is looked up by its key before
// it is made again, and made again only with the same key.
package fundingjournal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingstore"
)

// Errors callers branch on.
var (
	// ErrUnknownOutcome: the call may or may not have reached the broker;
	// the intent stays without a broker id and the next Submit or Resume
	// looks it up before calling again.
	ErrUnknownOutcome = errors.New("broker outcome unknown")
	// ErrKeyConflict: the broker holds another request under the intent's
	// key (422) and no journal of ours carries it. The intent goes to
	// review; no other key is ever tried for it.
	ErrKeyConflict = errors.New("idempotency key holds another request at the broker")
)

// Request is one movement a caller asks for. RequestID is the caller's
// id of the business request (a payment, a payout): the same RequestID
// is the same movement, however often it is submitted.
type Request struct {
	RequestID string
	AccountID string
	Direction fundingstore.Direction
	Amount    int64 // cents
}

// Key derives the intent key of r: deterministic, so every retry of the
// request — from this process or another after a crash — carries the
// same Idempotency-Key, and at most 128 characters, the broker's limit,
// whatever the ids' lengths.
func Key(r Request) string {
	s := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s", r.AccountID, r.Direction, r.RequestID))
	return "jnlc-" + string(r.Direction) + "-" + hex.EncodeToString(s[:20])
}

// Writer submits journals.
type Writer struct {
	Store  *fundingstore.Store
	Broker *fundingbroker.Client
	// FirmAccount is the firm's account at the broker, the other side of
	// every journal.
	FirmAccount string
	// LookBack is how far before an intent's creation the lookup lists
	// journals (the list filters by creation date); a day if zero.
	LookBack time.Duration
}

// Submit makes sure the journal of r exists at the broker and returns its
// movement (PENDING at least, with the broker's id). A repeat of a
// request already answered calls nothing.
func (w *Writer) Submit(ctx context.Context, r Request) (fundingstore.Movement, error) {
	m, created, err := w.Store.Intend(ctx, fundingstore.Movement{Domain: funding.Journal, IntentKey: Key(r),
		AccountID: r.AccountID, Direction: r.Direction, Amount: r.Amount, Currency: "USD"})
	if err != nil {
		return fundingstore.Movement{}, err
	}
	if m.BrokerID != "" {
		return m, nil
	}
	return w.send(ctx, m, !created)
}

// Resume finishes every intent whose outcome is unknown (after a crash or
// a timeout): each is looked up, and called again only when the broker
// has no journal of it. An intent the broker refused outright is not
// among them: its caller was told it failed.
func (w *Writer) Resume(ctx context.Context) error {
	open, err := w.Store.Unanswered(ctx, funding.Journal)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range open {
		if _, err := w.send(ctx, m, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (w *Writer) send(ctx context.Context, m fundingstore.Movement, mayExist bool) (fundingstore.Movement, error) {
	if mayExist {
		j, found, err := w.lookup(ctx, m)
		if err != nil {
			return fundingstore.Movement{}, fmt.Errorf("look up intent %s: %w", m.IntentKey, errors.Join(ErrUnknownOutcome, err))
		}
		if found {
			return w.Store.Accepted(ctx, m.IntentKey, j.ID)
		}
	}
	req := fundingbroker.JournalRequest{FromAccount: w.FirmAccount, ToAccount: m.AccountID, Amount: m.Amount, Description: m.IntentKey}
	if m.Direction == fundingstore.Debit {
		req.FromAccount, req.ToAccount = m.AccountID, w.FirmAccount
	}
	j, err := w.Broker.CreateJournal(ctx, req, m.IntentKey)
	switch {
	case err == nil:
		return w.Store.Accepted(ctx, m.IntentKey, j.ID)
	case fundingbroker.IsStatus(err, http.StatusUnprocessableEntity):
		// The key holds a request with another body. If it is ours (the
		// description carries the key), adopt it; else a person decides.
		j, found, lerr := w.lookup(ctx, m)
		if lerr != nil {
			return fundingstore.Movement{}, fmt.Errorf("intent %s: 422, then lookup: %w", m.IntentKey, errors.Join(ErrUnknownOutcome, lerr))
		}
		if found {
			return w.Store.Accepted(ctx, m.IntentKey, j.ID)
		}
		if rerr := w.Store.Review(ctx, fundingstore.News{Domain: funding.Journal, IntentKey: m.IntentKey, Source: "write"},
			fundingstore.ReasonKeyConflict); rerr != nil {
			return fundingstore.Movement{}, rerr
		}
		return fundingstore.Movement{}, fmt.Errorf("intent %s: %w: %v", m.IntentKey, ErrKeyConflict, err)
	case definite(err):
		if rerr := w.Store.Refused(ctx, m.IntentKey, err.Error()); rerr != nil {
			return fundingstore.Movement{}, errors.Join(fmt.Errorf("intent %s: %w", m.IntentKey, err), rerr)
		}
		return fundingstore.Movement{}, fmt.Errorf("intent %s: %w", m.IntentKey, err)
	default:
		return fundingstore.Movement{}, fmt.Errorf("intent %s: %w", m.IntentKey, errors.Join(ErrUnknownOutcome, err))
	}
}

// definite reports whether err is an answer saying the broker did not
// take the request (a 4xx other than 429): calling again with the same key
// is still safe, but there is nothing to look up.
func definite(err error) bool {
	var ae *fundingbroker.APIError
	return errors.As(err, &ae) && ae.Status/100 == 4 && ae.Status != http.StatusTooManyRequests
}

// lookup searches the broker's journals of m's account for the one that
// carries m's key.
func (w *Writer) lookup(ctx context.Context, m fundingstore.Movement) (fundingbroker.Journal, bool, error) {
	back := w.LookBack
	if back <= 0 {
		back = 24 * time.Hour
	}
	f := fundingbroker.JournalFilter{After: m.CreatedAt.Add(-back), ToAccount: m.AccountID}
	if m.Direction == fundingstore.Debit {
		f = fundingbroker.JournalFilter{After: m.CreatedAt.Add(-back), FromAccount: m.AccountID}
	}
	js, err := w.Broker.ListJournals(ctx, f)
	if err != nil {
		return fundingbroker.Journal{}, false, err
	}
	for _, j := range js {
		if j.Description == m.IntentKey {
			return j, true, nil
		}
	}
	return fundingbroker.Journal{}, false, nil
}
