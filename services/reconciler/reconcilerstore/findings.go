package reconcilerstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/concordhq/concord/services/reconciler"
)

// Status reads what `reconciler status` prints: the reconciliation lag (the
// seed's query: the oldest time since any payment was last verified, or
// created if never), the cursors and the open findings by kind.
func (s *Store) Status(ctx context.Context) (reconciler.Status, error) {
	var st reconciler.Status
	var lag *time.Duration
	err := s.pool.QueryRow(ctx, `select now(), count(*),
			max(now() - coalesce(last_reconciled_at, created_at))
		from payments`).Scan(&st.Now, &st.Payments, &lag)
	if err != nil {
		return st, fmt.Errorf("reconciler store: lag: %w", err)
	}
	if lag != nil {
		st.Lag = *lag
	}
	return st, s.CursorsAndFindings(ctx, &st)
}

// CursorsAndFindings fills in st's cursors and open findings (by kind and
// by verdict). The broker rail's tables in the funding database have the
// same shape, so its status reads them through this too.
func (s *Store) CursorsAndFindings(ctx context.Context, st *reconciler.Status) error {
	rows, err := s.pool.Query(ctx, `select job, last_id, cycle_started_at, last_cycle_completed_at,
			last_cycle_duration, cycles_completed
		from reconciliation_cursor order by job`)
	if err != nil {
		return fmt.Errorf("reconciler store: cursors: %w", err)
	}
	st.Cursors, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (reconciler.CursorStatus, error) {
		var c reconciler.CursorStatus
		err := r.Scan(&c.Job, &c.LastID, &c.CycleStartedAt, &c.LastCycleCompletedAt, &c.LastCycleDuration, &c.CyclesCompleted)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("reconciler store: cursors: %w", err)
	}
	if st.OpenFindings, err = s.OpenFindings(ctx); err != nil {
		return err
	}
	st.OpenByVerdict, err = s.openByVerdict(ctx)
	return err
}

// openByVerdict counts unresolved findings by verdict.
func (s *Store) openByVerdict(ctx context.Context) (map[reconciler.Verdict]int, error) {
	rows, err := s.pool.Query(ctx, `select verdict, count(*) from reconciliation_findings
		where resolved_at is null group by verdict`)
	if err != nil {
		return nil, fmt.Errorf("reconciler store: open findings by verdict: %w", err)
	}
	out := make(map[reconciler.Verdict]int)
	var v string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&v, &n}, func() error {
		out[reconciler.Verdict(v)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reconciler store: open findings by verdict: %w", err)
	}
	return out, nil
}

// OpenFindings counts unresolved findings by kind.
func (s *Store) OpenFindings(ctx context.Context) (map[reconciler.Kind]int, error) {
	rows, err := s.pool.Query(ctx, `select kind, count(*) from reconciliation_findings
		where resolved_at is null group by kind`)
	if err != nil {
		return nil, fmt.Errorf("reconciler store: open findings: %w", err)
	}
	defer rows.Close()
	out := make(map[reconciler.Kind]int)
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			return nil, fmt.Errorf("reconciler store: open findings: %w", err)
		}
		out[reconciler.Kind(k)] = n
	}
	return out, rows.Err()
}

// FindingFilter selects findings for List.
type FindingFilter struct {
	All       bool // include resolved findings (default: open only)
	Kind      reconciler.Kind
	Verdict   reconciler.Verdict
	PaymentID int64
	Limit     int // default 100
}

const findingCols = `f.id, f.payment_id, p.order_id, coalesce(p.provider_payment_id, ''), f.kind, f.verdict,
	f.local_status, coalesce(f.external_status, ''), coalesce(f.repair_command, ''),
	coalesce(f.command_event_id::text, ''), f.source, f.detected_at, f.resolved_at,
	coalesce(f.resolution, ''), coalesce(f.resolved_by, ''), coalesce(f.note, '')`

func scanFinding(r pgx.Row) (reconciler.Finding, error) {
	var f reconciler.Finding
	var kind, verdict, cmd, source, resolution string
	err := r.Scan(&f.ID, &f.PaymentID, &f.OrderID, &f.ProviderID, &kind, &verdict, &f.LocalStatus, &f.ExternalStatus,
		&cmd, &f.CommandEventID, &source, &f.DetectedAt, &f.ResolvedAt, &resolution, &f.ResolvedBy, &f.Note)
	f.Kind, f.Verdict, f.RepairCommand = reconciler.Kind(kind), reconciler.Verdict(verdict), reconciler.Command(cmd)
	f.Source, f.Resolution = reconciler.Source(source), reconciler.Resolution(resolution)
	return f, err
}

// Findings lists findings, newest first.
func (s *Store) Findings(ctx context.Context, f FindingFilter) ([]reconciler.Finding, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	rows, err := s.pool.Query(ctx, `select `+findingCols+`
		from reconciliation_findings f join payments p on p.id = f.payment_id
		where ($1 or f.resolved_at is null)
		  and ($2 = '' or f.kind = $2)
		  and ($3 = '' or f.verdict = $3)
		  and ($4 = 0 or f.payment_id = $4)
		order by f.id desc limit $5`, f.All, string(f.Kind), string(f.Verdict), f.PaymentID, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("reconciler store: list findings: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (reconciler.Finding, error) { return scanFinding(r) })
	if err != nil {
		return nil, fmt.Errorf("reconciler store: list findings: %w", err)
	}
	return out, nil
}

// Finding reads one finding; an unknown id is ErrFindingNotFound.
func (s *Store) Finding(ctx context.Context, id int64) (reconciler.Finding, error) {
	f, err := scanFinding(s.pool.QueryRow(ctx, `select `+findingCols+`
		from reconciliation_findings f join payments p on p.id = f.payment_id where f.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return f, fmt.Errorf("finding %d: %w", id, reconciler.ErrFindingNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("reconciler store: finding %d: %w", id, err)
	}
	return f, nil
}

// Resolve closes an open finding by hand with a note saying what was done
// (refunded, shipped back, written off …). It is the end of the review
// workflow for NeedsReview findings. The note is required: a resolution
// nobody can explain later is no resolution.
func (s *Store) Resolve(ctx context.Context, id int64, by, note string) error {
	if note == "" {
		return fmt.Errorf("finding %d: a note saying what was done is required", id)
	}
	if by == "" {
		by = "operator"
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ok, err := ResolveFinding(ctx, tx, id, reconciler.ResolutionManual, by, note)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		var resolved bool
		err = tx.QueryRow(ctx, `select resolved_at is not null from reconciliation_findings where id = $1`, id).Scan(&resolved)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("finding %d: %w", id, reconciler.ErrFindingNotFound)
		}
		if err != nil {
			return fmt.Errorf("finding %d: %w", id, err)
		}
		return fmt.Errorf("finding %d: %w", id, reconciler.ErrFindingResolved)
	})
}

// ResolveFinding closes finding id in tx if it is still open and reports
// whether it did. The repair handler calls it in the transaction that
// applied (or found already applied) the repair, so the finding closes
// exactly when its effect commits.
func ResolveFinding(ctx context.Context, tx pgx.Tx, id int64, how reconciler.Resolution, by, note string) (bool, error) {
	tag, err := tx.Exec(ctx, `update reconciliation_findings
		set resolved_at = now(), resolution = $2, resolved_by = $3, note = nullif($4, '')
		where id = $1 and resolved_at is null`, id, string(how), by, note)
	if err != nil {
		return false, fmt.Errorf("resolve finding %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}
