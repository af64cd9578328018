// Package reconcilerbroker is the reconciler's view of the broker (Alpaca's
// Broker API, or broker-sim): journals, transfers, funding-wallet
// transfers and the activities stream, read through funding-svc's client
// and reduced to reconciler.BrokerRecord. It paces every call with a
// token bucket (a share of the broker's limit) and, when the broker still
// answers 429, waits until the X-RateLimit-Reset the answer names before
// any worker calls again.
package reconcilerbroker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/reconciler"
)

// Reader implements reconciler.BrokerReader.
type Reader struct {
	// Calls reads records (its HTTP client bounds each call); Streams
	// replays the activities stream (no client timeout: the window bounds
	// the replay).
	Client  *fundingbroker.Client
	Streams *fundingbroker.Client
	// Firm is the firm's account: a journal from it credits the customer,
	// one to it debits them.
	Firm string
	// Limiter paces every call (nil: unpaced).
	Limiter *rate.Limiter
	// Attempts bounds the tries of one call met by 429s (default 5).
	Attempts int
	// Observe, when set, counts each call by operation and outcome.
	Observe func(op, outcome string)

	calls, limited atomic.Int64
	mu             sync.Mutex
	blockedUntil   time.Time
}

var _ reconciler.BrokerReader = (*Reader)(nil)

// Calls is the number of calls made.
func (r *Reader) Calls() int { return int(r.calls.Load()) }

// RateLimited is the number of 429 answers met.
func (r *Reader) RateLimited() int { return int(r.limited.Load()) }

// pageSize is the transfers asked for per list call.
const pageSize = 100

// minBackoff is the pause after a 429 whose Reset is missing or already
// past (the broker counts whole seconds).
const minBackoff = 250 * time.Millisecond

// call makes one broker call through the pacing and the rate-limit gate,
// trying again after a 429 once the broker's window has reset.
func (r *Reader) call(ctx context.Context, op string, f func(context.Context) error) error {
	attempts := r.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	var err error
	for range attempts {
		if err = r.admit(ctx); err != nil {
			return err
		}
		r.calls.Add(1)
		err = f(ctx)
		var ae *fundingbroker.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
			break
		}
		r.limited.Add(1)
		r.observe(op, "rate_limited")
		r.block(ae.Reset)
	}
	switch {
	case err == nil:
		r.observe(op, "ok")
		return nil
	case fundingbroker.IsStatus(err, http.StatusNotFound):
		r.observe(op, "not_found")
		return fmt.Errorf("broker %s: %w: %w", op, reconciler.ErrProviderNotFound, err)
	default:
		r.observe(op, "unavailable")
		return fmt.Errorf("broker %s: %w: %w", op, reconciler.ErrProviderUnavailable, err)
	}
}

func (r *Reader) observe(op, outcome string) {
	if r.Observe != nil {
		r.Observe(op, outcome)
	}
}

// block holds every worker's next call until reset: the broker counts
// for the whole correspondent, so one 429 speaks for all of them.
func (r *Reader) block(reset time.Time) {
	until := reset
	if now := time.Now(); !until.After(now) {
		until = now.Add(minBackoff)
	}
	r.mu.Lock()
	if until.After(r.blockedUntil) {
		r.blockedUntil = until
	}
	r.mu.Unlock()
}

// admit waits out a rate-limit block, then the pacing.
func (r *Reader) admit(ctx context.Context) error {
	for {
		r.mu.Lock()
		wait := time.Until(r.blockedUntil)
		r.mu.Unlock()
		if wait <= 0 {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if r.Limiter == nil {
		return ctx.Err()
	}
	return r.Limiter.Wait(ctx)
}

// Journal reads one journal by id.
func (r *Reader) Journal(ctx context.Context, id string) (reconciler.BrokerRecord, error) {
	var j fundingbroker.Journal
	err := r.call(ctx, "get_journal", func(ctx context.Context) (err error) {
		j, err = r.Client.GetJournal(ctx, id)
		return err
	})
	if err != nil {
		return reconciler.BrokerRecord{}, fmt.Errorf("journal %s: %w", id, err)
	}
	return r.journal(j), nil
}

// Journals lists the cash journals created in [since, until): the list
// filters on whole creation dates, so the days around the window are
// asked for and the rest dropped.
func (r *Reader) Journals(ctx context.Context, since, until time.Time) ([]reconciler.BrokerRecord, error) {
	var js []fundingbroker.Journal
	f := fundingbroker.JournalFilter{After: since.AddDate(0, 0, -1), Before: until.AddDate(0, 0, 1)}
	err := r.call(ctx, "list_journals", func(ctx context.Context) (err error) {
		js, err = r.Client.ListJournals(ctx, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("journals %s..%s: %w", since.Format(time.RFC3339), until.Format(time.RFC3339), err)
	}
	out := make([]reconciler.BrokerRecord, 0, len(js))
	for _, j := range js {
		if rec := r.journal(j); !rec.CreatedAt.Before(since) && rec.CreatedAt.Before(until) {
			out = append(out, rec)
		}
	}
	return out, nil
}

func (r *Reader) journal(j fundingbroker.Journal) reconciler.BrokerRecord {
	rec := reconciler.BrokerRecord{Domain: funding.Journal, BrokerID: j.ID, Status: j.Status, Currency: currency(j.Currency)}
	switch {
	case j.FromAccount == r.Firm:
		rec.AccountID, rec.Direction = j.ToAccount, "credit"
	case j.ToAccount == r.Firm:
		rec.AccountID, rec.Direction = j.FromAccount, "debit"
	}
	rec.Amount, _ = fundingbroker.ParseCents(j.NetAmount)
	rec.CreatedAt, _ = time.Parse(time.RFC3339Nano, j.CreatedAt)
	return rec
}

// Transfers lists every transfer of the account, a page at a time.
func (r *Reader) Transfers(ctx context.Context, account string) ([]reconciler.BrokerRecord, error) {
	var out []reconciler.BrokerRecord
	for offset := 0; ; offset += pageSize {
		var page []fundingbroker.Transfer
		err := r.call(ctx, "list_transfers", func(ctx context.Context) (err error) {
			page, err = r.Client.ListTransfersPage(ctx, account, pageSize, offset)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("transfers of %s: %w", account, err)
		}
		for _, t := range page {
			rec := reconciler.BrokerRecord{Domain: funding.Transfer, BrokerID: t.ID, AccountID: t.AccountID, Status: t.Status,
				Direction: direction(t.Direction), Currency: "USD", CreatedAt: t.CreatedAt}
			rec.Amount, _ = fundingbroker.ParseCents(t.Amount)
			out = append(out, rec)
		}
		if len(page) < pageSize {
			return out, nil
		}
	}
}

// WalletTransfer reads one funding-wallet transfer.
func (r *Reader) WalletTransfer(ctx context.Context, account, id string) (reconciler.BrokerRecord, error) {
	var w fundingbroker.WalletTransfer
	err := r.call(ctx, "get_wallet_transfer", func(ctx context.Context) (err error) {
		w, err = r.Client.GetWalletTransfer(ctx, account, id)
		return err
	})
	if err != nil {
		return reconciler.BrokerRecord{}, fmt.Errorf("wallet transfer %s of %s: %w", id, account, err)
	}
	return wallet(w), nil
}

// WalletTransfers lists the account's funding-wallet transfers.
func (r *Reader) WalletTransfers(ctx context.Context, account string) ([]reconciler.BrokerRecord, error) {
	var ws []fundingbroker.WalletTransfer
	err := r.call(ctx, "list_wallet_transfers", func(ctx context.Context) (err error) {
		ws, err = r.Client.ListWalletTransfers(ctx, account)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("wallet transfers of %s: %w", account, err)
	}
	out := make([]reconciler.BrokerRecord, len(ws))
	for i, w := range ws {
		out[i] = wallet(w)
	}
	return out, nil
}

func wallet(w fundingbroker.WalletTransfer) reconciler.BrokerRecord {
	rec := reconciler.BrokerRecord{Domain: funding.WalletTransfer, BrokerID: w.ID, AccountID: w.AccountID, Status: w.Status,
		Direction: direction(w.Direction), Currency: "USD", CreatedAt: w.CreatedAt}
	rec.Amount, _ = fundingbroker.ParseCents(w.TotalAmount)
	return rec
}

type activity struct {
	AccountID    string    `json:"account_id"`
	At           time.Time `json:"at"`
	ActivityType string    `json:"activity_type"`
	RefID        string    `json:"ref_id"`
	Details      struct {
		JournalID  string `json:"journal_id"`
		TransferID string `json:"transfer_id"`
	} `json:"details"`
}

// maxPasses bounds the replays of one window that each still bring
// activities not seen before.
const maxPasses = 20

// Activities replays /v2beta1/events/activities for [since, until). The
// broker ends a bounded replay with 200 at until, but a replay cut short
// (a disconnect) ends the same way: so the window is read again from the
// latest business time seen until a pass brings nothing new, each
// activity passed to each once (by ref_id, the stream's dedupe key).
func (r *Reader) Activities(ctx context.Context, since, until time.Time, each func(reconciler.Activity)) error {
	seen := map[string]bool{}
	from := since
	for range maxPasses {
		fresh := 0
		latest := from
		err := r.call(ctx, "replay_activities", func(ctx context.Context) error {
			return r.Streams.Replay(ctx, "/v2beta1/events/activities", from, until, func(data []byte) error {
				var a activity
				if err := json.Unmarshal(data, &a); err != nil {
					return fmt.Errorf("activity %s: %w", data, err)
				}
				if a.RefID == "" || seen[a.RefID] {
					return nil
				}
				seen[a.RefID] = true
				fresh++
				if a.At.After(latest) {
					latest = a.At
				}
				each(reconciler.Activity{AccountID: a.AccountID, Type: a.ActivityType,
					JournalID: a.Details.JournalID, TransferID: a.Details.TransferID})
				return nil
			})
		})
		if err != nil {
			return fmt.Errorf("activities %s..%s: %w", from.Format(time.RFC3339), until.Format(time.RFC3339), err)
		}
		if fresh == 0 {
			return nil
		}
		from = latest
	}
	return fmt.Errorf("activities %s..%s: still new activities after %d replays: %w",
		since.Format(time.RFC3339), until.Format(time.RFC3339), maxPasses, reconciler.ErrProviderUnavailable)
}

func direction(d string) string {
	if strings.EqualFold(d, "OUTGOING") {
		return "debit"
	}
	if strings.EqualFold(d, "INCOMING") {
		return "credit"
	}
	return ""
}

func currency(c string) string {
	if c == "" {
		return "USD"
	}
	return strings.ToUpper(c)
}
