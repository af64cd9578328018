package reconciler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/concordhq/concord/services/funding"
)

// memBroker is a broker held in memory that counts the calls made to it.
type memBroker struct {
	mu       sync.Mutex
	journals map[string]BrokerRecord
	byID     int // Journal calls
	lists    int // Journals calls
	failList bool
}

func (b *memBroker) Journal(_ context.Context, id string) (BrokerRecord, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.byID++
	r, ok := b.journals[id]
	if !ok {
		return BrokerRecord{}, fmt.Errorf("journal %s: %w", id, ErrProviderNotFound)
	}
	return r, nil
}

func (b *memBroker) Journals(_ context.Context, since, until time.Time) ([]BrokerRecord, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lists++
	if b.failList {
		return nil, fmt.Errorf("journals: %w", ErrProviderUnavailable)
	}
	var out []BrokerRecord
	for _, r := range b.journals {
		if !r.CreatedAt.Before(since) && r.CreatedAt.Before(until) {
			out = append(out, r)
		}
	}
	return out, nil
}

func (b *memBroker) Transfers(context.Context, string) ([]BrokerRecord, error) { return nil, nil }
func (b *memBroker) WalletTransfer(_ context.Context, _, id string) (BrokerRecord, error) {
	return BrokerRecord{}, fmt.Errorf("wallet transfer %s: %w", id, ErrProviderNotFound)
}
func (b *memBroker) WalletTransfers(context.Context, string) ([]BrokerRecord, error) { return nil, nil }
func (b *memBroker) Activities(context.Context, time.Time, time.Time, func(Activity)) error {
	return nil
}
func (b *memBroker) Calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byID + b.lists
}
func (b *memBroker) RateLimited() int { return 0 }

// onePage is a BrokerStore holding one page of movements; it keeps what
// RecordMovements was given.
type onePage struct {
	page    MovementPage
	results []MovementResult
}

func (s *onePage) ReadMovements(context.Context, string, int) (MovementPage, error) {
	return s.page, nil
}
func (s *onePage) RecordMovements(_ context.Context, _ MovementPage, rs []MovementResult) (RecordStats, error) {
	s.results = rs
	return RecordStats{}, nil
}
func (s *onePage) CompleteCycle(context.Context, string, int64) error { return nil }
func (s *onePage) MovementsByBrokerID(context.Context, []BrokerRef) ([]Movement, time.Time, error) {
	return nil, time.Time{}, nil
}
func (s *onePage) Accounts(context.Context) ([]string, error) { return nil, nil }
func (s *onePage) RecordMovementFindings(context.Context, Source, []MovementResult) (RecordStats, error) {
	return RecordStats{}, nil
}

// A page of journals is read with one list call by creation window, not
// one call per journal; a journal the list does not show (created at the
// broker outside the window, or the list failing) is still read by id.
func TestTheScanListsAPagesJournalsByCreationWindow(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	created := now.Add(-time.Hour)
	var rows []Movement
	journals := map[string]BrokerRecord{}
	for i := range 6 {
		id := fmt.Sprintf("j-%d", i)
		at := created.Add(time.Duration(i) * time.Second)
		if i == 5 {
			at = created.Add(-48 * time.Hour) // the broker's clock says otherwise
		}
		journals[id] = BrokerRecord{Domain: funding.Journal, BrokerID: id, Status: "executed", CreatedAt: at}
		rows = append(rows, Movement{ID: int64(i + 1), Domain: funding.Journal, BrokerID: id, AccountID: "a",
			Status: funding.Pending, CreatedAt: created.Add(time.Duration(i) * time.Second), UpdatedAt: created})
	}
	for name, tc := range map[string]struct {
		failList          bool
		wantLists, wantID int
	}{
		"listed":          {false, 1, 1},
		"the list failed": {true, 1, 6},
	} {
		t.Run(name, func(t *testing.T) {
			b := &memBroker{journals: journals, failList: tc.failList}
			s := &onePage{page: MovementPage{Job: "j", Rows: rows, Now: now}}
			r, err := NewBrokerReconciler(BrokerConfig{Store: s, Broker: b, Grace: time.Minute, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := r.RunBatch(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if b.lists != tc.wantLists || b.byID != tc.wantID {
				t.Fatalf("%d list calls and %d reads by id, want %d and %d", b.lists, b.byID, tc.wantLists, tc.wantID)
			}
			if rep.Calls != tc.wantLists+tc.wantID || rep.Observed != 6 || rep.Counts[Repairable] != 6 || len(s.results) != 6 {
				t.Fatalf("batch %+v (%d results); want the 6 journals observed and repairable", rep, len(s.results))
			}
		})
	}
}
