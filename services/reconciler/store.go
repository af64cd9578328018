package reconciler

import (
	"context"
	"time"
)

// Page is one keyset page of payments read for a batch: the rows with
// id > CursorID in id order, read in one short transaction. Now is the
// database's clock at that moment, the one every reconciler agrees on.
type Page struct {
	Job      string
	CursorID int64
	Rows     []Row
	Now      time.Time
}

// Result is the decision about one row of a page, with the provider status
// it was based on (empty when the provider was not asked or did not answer).
type Result struct {
	Row      Row
	Decision Decision
	External string
}

// RecordStats says what recording a batch changed.
type RecordStats struct {
	// Verified rows whose last_reconciled_at advanced.
	Verified int
	// Moved rows changed (status or version) between the page read and the
	// record: their decision was made on stale data, so nothing was recorded
	// for them; the next visit decides.
	Moved int
	// FindingsOpened counts new findings; an already-open finding for the
	// same payment and kind is not counted (the partial unique index keeps
	// it to one).
	FindingsOpened int
	// CommandsEmitted counts repair commands appended to the outbox: one
	// per new Repairable finding, never for a finding already open.
	CommandsEmitted int
	// FindingsCleared counts open findings resolved because the payment is
	// now verified in sync.
	FindingsCleared int
	// ByKind counts new findings per kind; Commands counts emitted
	// commands per command.
	ByKind   map[Kind]int
	Commands map[Command]int
}

func (s *RecordStats) add(o RecordStats) {
	s.Verified += o.Verified
	s.Moved += o.Moved
	s.FindingsOpened += o.FindingsOpened
	s.CommandsEmitted += o.CommandsEmitted
	s.FindingsCleared += o.FindingsCleared
	for k, n := range o.ByKind {
		if s.ByKind == nil {
			s.ByKind = make(map[Kind]int)
		}
		s.ByKind[k] += n
	}
	for c, n := range o.Commands {
		if s.Commands == nil {
			s.Commands = make(map[Command]int)
		}
		s.Commands[c] += n
	}
}

// Source says which mode detected a finding.
type Source string

// Sources.
const (
	SourceScan Source = "scan"
	SourceHeal Source = "heal"
)

// Store is the reconciler's database.
type Store interface {
	// ReadPage reads up to limit rows after the job's cursor in one short
	// transaction, creating the cursor on first use. No lock is held after
	// it returns.
	ReadPage(ctx context.Context, job string, limit int) (Page, error)
	// Record applies a batch's results and advances the cursor to the last
	// row of the page in one transaction. The cursor moves only if it is
	// still at page.CursorID (compare-and-set); otherwise nothing is written
	// and the error wraps ErrConcurrentRun.
	Record(ctx context.Context, page Page, results []Result) (RecordStats, error)
	// CompleteCycle moves the cursor from cursorID back to 0 and marks the
	// cycle complete, with the same compare-and-set (ErrConcurrentRun).
	CompleteCycle(ctx context.Context, job string, cursorID int64) error
	// RowsByProviderID reads the rows of the given provider payment ids
	// (heal mode); ids without a row are absent from the result.
	RowsByProviderID(ctx context.Context, ids []string) ([]Row, time.Time, error)
	// RecordFindings applies results without touching any cursor (heal
	// mode): the same guards, finding and command writes as Record.
	RecordFindings(ctx context.Context, source Source, results []Result) (RecordStats, error)
}
