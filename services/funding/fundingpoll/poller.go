// Package fundingpoll is the POLL layer of the broker rail: the scheduler
// for funding-wallet transfers, a rail that sends no events at all. Each
// round asks the broker about the records it is not done with — never a
// final one — spread evenly across the interval rather than in a burst,
// and reports each answer to the store like any other news.
//
// Expected latency: a wallet transfer's change shows locally within one
// interval plus one call after the broker makes it (with the default
// interval of a minute, about a minute), and a round with more open
// records than Batch takes the rest in later rounds.
package fundingpoll

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/funding/fundingbroker"
	"github.com/concordhq/concord/services/funding/fundingstore"
)

// Poller polls funding-wallet transfers.
type Poller struct {
	Store  *fundingstore.Store
	Broker *fundingbroker.Client
	// Interval is one round's length (a minute if zero); its calls are
	// spread evenly across it.
	Interval time.Duration
	// Batch is the most records a round asks about (500 if zero).
	Batch int
	// CompletedWindow is how long a completed record is still asked about
	// (an hour if zero).
	CompletedWindow time.Duration
}

func (p *Poller) interval() time.Duration {
	if p.Interval <= 0 {
		return time.Minute
	}
	return p.Interval
}

// Run polls round after round until ctx ends.
func (p *Poller) Run(ctx context.Context) error {
	for {
		start := time.Now()
		_, _ = p.Round(ctx) // a failed call is asked again next round
		if err := wait(ctx, time.Until(start.Add(p.interval()))); err != nil {
			return err
		}
	}
}

// Round asks about every open record once, the calls spaced Interval/n
// apart, and returns how many it asked about.
func (p *Poller) Round(ctx context.Context) (int, error) {
	batch, window := p.Batch, p.CompletedWindow
	if batch <= 0 {
		batch = 500
	}
	if window <= 0 {
		window = time.Hour
	}
	open, err := p.Store.Open(ctx, funding.WalletTransfer, window, batch)
	if err != nil || len(open) == 0 {
		return 0, err
	}
	gap := p.interval() / time.Duration(len(open))
	var errs []error
	for i, m := range open {
		if i > 0 {
			if err := wait(ctx, gap); err != nil {
				return i, err
			}
		}
		w, err := p.Broker.GetWalletTransfer(ctx, m.AccountID, m.BrokerID)
		if err != nil {
			errs = append(errs, fmt.Errorf("wallet transfer %s: %w", m.BrokerID, err))
			continue
		}
		if _, err := p.Store.Report(ctx, fundingstore.News{Domain: funding.WalletTransfer, BrokerID: m.BrokerID, BrokerStatus: w.Status, Source: "poll"}); err != nil {
			errs = append(errs, err)
		}
	}
	return len(open), errors.Join(errs...)
}

// wait is a pause between scheduled calls that ends early with ctx.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
