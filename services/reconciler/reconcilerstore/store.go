// Package reconcilerstore is the reconciler's record in the payments database: the
// keyset cursor (reconciliation_cursor), the findings
// (reconciliation_findings) and the lag queries. Repair commands go to the
// same database's outbox in the transaction that records their finding.
package reconcilerstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/concordhq/concord/infra/kit"
	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/services/reconciler"
)

//go:embed migrations/*.sql
var migrations embed.FS

// tracer follows the global tracer provider (see kit.StartTracing).
var tracer = otel.Tracer("github.com/concordhq/concord/services/reconciler/reconcilerstore")

// VersionTable records which reconciler migrations ran.
const VersionTable = "reconciler_schema_version"

// Migrate creates or updates the reconciler's tables. The payments table
// (services/payment/paymentstore.Migrate) and the outbox (outbox.Migrate) must
// exist first.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// Store implements reconciler.Store on a pgx pool.
type Store struct {
	pool *pgxpool.Pool
	// Outbox routes the repair commands the store appends (its topic
	// prefix); the zero value uses the catalog's topic.
	Outbox outbox.Writer
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

var _ reconciler.Store = (*Store)(nil)

const rowCols = `id, order_id, coalesce(provider_payment_id, ''), status, version, created_at, updated_at, coalesce(traceparent, '')`

func scanRows(rows pgx.Rows) ([]reconciler.Row, error) {
	defer rows.Close()
	var out []reconciler.Row
	for rows.Next() {
		var r reconciler.Row
		if err := rows.Scan(&r.PaymentID, &r.OrderID, &r.ProviderID, &r.Status, &r.Version, &r.CreatedAt, &r.UpdatedAt, &r.Traceparent); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ReadPage reads the job's cursor and the next limit payments by id in one
// short read transaction. It uses the primary key only, so a page costs the
// same at id 10 as at id 10 million, and no row can be skipped or starved
// however often rows are updated.
func (s *Store) ReadPage(ctx context.Context, job string, limit int) (reconciler.Page, error) {
	page := reconciler.Page{Job: job}
	var err error
	page.CursorID, page.Now, page.Rows, err = ReadAfterCursor(ctx, s.pool, job, "payments",
		`select `+rowCols+` from payments where id > $1 order by id limit $2`, limit, scanRows)
	if err != nil {
		return reconciler.Page{}, err
	}
	return page, nil
}

// ReadAfterCursor reads job's cursor and, with query (its $1 the cursor,
// $2 the limit), the next limit rows of what by id, in one short
// transaction: the keyset read of every rail's scan.
func ReadAfterCursor[R any](ctx context.Context, pool *pgxpool.Pool, job, what, query string, limit int,
	scan func(pgx.Rows) ([]R, error)) (cursorID int64, now time.Time, rows []R, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		if cursorID, now, err = ReadCursor(ctx, tx, job); err != nil {
			return err
		}
		r, err := tx.Query(ctx, query, cursorID, limit)
		if err != nil {
			return fmt.Errorf("read %s after id %d: %w", what, cursorID, err)
		}
		if rows, err = scan(r); err != nil {
			return fmt.Errorf("read %s after id %d: %w", what, cursorID, err)
		}
		return nil
	})
	if err != nil {
		return 0, time.Time{}, nil, fmt.Errorf("reconciler store: job %s: %w", job, err)
	}
	return cursorID, now, rows, nil
}

// Record advances the cursor by compare-and-set first, then records the
// results, all in one transaction. The compare-and-set comes first so that a
// second reconciler recording the same page waits on the cursor row, finds
// it moved once the first commits, and writes nothing at all.
func (s *Store) Record(ctx context.Context, page reconciler.Page, results []reconciler.Result) (reconciler.RecordStats, error) {
	if len(page.Rows) == 0 {
		return reconciler.RecordStats{}, nil
	}
	next := page.Rows[len(page.Rows)-1].PaymentID
	return RecordPage(ctx, s.pool, page.Job, page.CursorID, next, func(tx pgx.Tx) (reconciler.RecordStats, error) {
		return s.apply(ctx, tx, reconciler.SourceScan, results)
	})
}

// RecordFindings records results without a cursor (heal mode).
func (s *Store) RecordFindings(ctx context.Context, source reconciler.Source, results []reconciler.Result) (reconciler.RecordStats, error) {
	return RecordWithoutCursor(ctx, s.pool, source, func(tx pgx.Tx) (reconciler.RecordStats, error) {
		return s.apply(ctx, tx, source, results)
	})
}

// RecordPage moves job's cursor from cursorID to next by compare-and-set,
// then records a page's results with apply, in one transaction: the
// order Record explains, for every rail's store.
func RecordPage(ctx context.Context, pool *pgxpool.Pool, job string, cursorID, next int64,
	apply func(pgx.Tx) (reconciler.RecordStats, error)) (reconciler.RecordStats, error) {
	var stats reconciler.RecordStats
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := AdvanceCursor(ctx, tx, job, cursorID, next); err != nil {
			return err
		}
		var err error
		stats, err = apply(tx)
		return err
	})
	if err != nil {
		return reconciler.RecordStats{}, fmt.Errorf("reconciler store: job %s: record page after id %d: %w", job, cursorID, err)
	}
	return stats, nil
}

// RecordWithoutCursor records results with apply in one transaction,
// moving no cursor (a heal's window).
func RecordWithoutCursor(ctx context.Context, pool *pgxpool.Pool, source reconciler.Source,
	apply func(pgx.Tx) (reconciler.RecordStats, error)) (reconciler.RecordStats, error) {
	var stats reconciler.RecordStats
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		stats, err = apply(tx)
		return err
	})
	if err != nil {
		return reconciler.RecordStats{}, fmt.Errorf("reconciler store: record %s results: %w", source, err)
	}
	return stats, nil
}

// apply records verified rows, their findings and repair commands in tx.
//
// A row whose status or version changed since it was read is left alone
// (Moved): the decision was made on a stale picture, most likely because the
// webhook we were about to call missed has just arrived. Its next visit
// decides.
func (s *Store) apply(ctx context.Context, tx pgx.Tx, source reconciler.Source, results []reconciler.Result) (reconciler.RecordStats, error) {
	stats := reconciler.RecordStats{ByKind: map[reconciler.Kind]int{}, Commands: map[reconciler.Command]int{}}
	var ids, versions []int64
	var statuses, externals []string
	verified := make(map[int64]reconciler.Result)
	for _, r := range results {
		if !r.Decision.Verified {
			continue
		}
		ids = append(ids, r.Row.PaymentID)
		versions = append(versions, r.Row.Version)
		statuses = append(statuses, r.Row.Status)
		externals = append(externals, r.External)
		verified[r.Row.PaymentID] = r
	}
	if len(ids) == 0 {
		return stats, nil
	}
	// last_reconciled_at advances only for rows actually verified, and the
	// guard on version and status keeps a concurrent transition's row out.
	// updated_at is not touched: it belongs to the payment's own changes
	// and drives the grace window.
	rows, err := tx.Query(ctx, `update payments p
		set observed_external_status = coalesce(nullif(v.ext, ''), p.observed_external_status),
		    last_reconciled_at = now()
		from unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) as v(id, version, status, ext)
		where p.id = v.id and p.version = v.version and p.status = v.status
		returning p.id`, ids, versions, statuses, externals)
	if err != nil {
		return stats, fmt.Errorf("mark %d payments verified: %w", len(ids), err)
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return stats, fmt.Errorf("mark %d payments verified: %w", len(ids), err)
	}
	stats.Verified = len(kept)
	stats.Moved = len(ids) - len(kept)

	var inSync []int64
	for _, id := range kept {
		r := verified[id]
		switch {
		case r.Decision.Verdict == reconciler.InSync:
			inSync = append(inSync, id)
		case r.Decision.Kind != "":
			opened, cmd, err := s.openFinding(ctx, tx, source, r)
			if err != nil {
				return stats, err
			}
			if opened {
				stats.FindingsOpened++
				stats.ByKind[r.Decision.Kind]++
			}
			if cmd {
				stats.CommandsEmitted++
				stats.Commands[r.Decision.Command]++
			}
		}
	}
	if len(inSync) > 0 {
		tag, err := tx.Exec(ctx, `update reconciliation_findings
			set resolved_at = now(), resolution = 'cleared', resolved_by = 'reconciler',
			    note = 'verified in sync by a later ' || $2
			where payment_id = any($1) and resolved_at is null`, inSync, string(source))
		if err != nil {
			return stats, fmt.Errorf("clear findings of %d in-sync payments: %w", len(inSync), err)
		}
		stats.FindingsCleared = int(tag.RowsAffected())
	}
	return stats, nil
}

// openFinding inserts the finding unless one is open for the payment and
// kind already, and for a new Repairable finding appends its repair command
// to the outbox in the same transaction. A finding already open means its
// command was emitted when it opened: emitting again would only repeat it.
func (s *Store) openFinding(ctx context.Context, tx pgx.Tx, source reconciler.Source, r reconciler.Result) (opened, emitted bool, err error) {
	d := r.Decision
	var cmd *string
	if d.Verdict == reconciler.Repairable {
		c := string(d.Command)
		cmd = &c
	}
	var id int64
	var detected time.Time
	err = tx.QueryRow(ctx, `insert into reconciliation_findings
			(payment_id, kind, verdict, local_status, external_status, repair_command, source)
		values ($1, $2, $3, $4, nullif($5, ''), $6, $7)
		on conflict (payment_id, kind) where resolved_at is null do nothing
		returning id, detected_at`,
		r.Row.PaymentID, string(d.Kind), string(d.Verdict), r.Row.Status, r.External, cmd, string(source)).Scan(&id, &detected)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("payment %d: record finding %s: %w", r.Row.PaymentID, d.Kind, err)
	}
	if cmd == nil {
		return true, false, nil
	}
	payload, ok := reconciler.RepairCommandData{
		PaymentID:              strconv.FormatInt(r.Row.PaymentID, 10),
		OrderID:                r.Row.OrderID,
		ProviderPaymentID:      r.Row.ProviderID,
		FindingID:              id,
		Kind:                   d.Kind,
		ExpectedLocalStatus:    r.Row.Status,
		ObservedProviderStatus: r.External,
		DetectedAt:             detected.UTC(),
	}.Payload(d.Command)
	if !ok {
		return false, false, fmt.Errorf("payment %d: finding %d: %w: no event for command %q", r.Row.PaymentID, id, outbox.ErrInvalidEvent, d.Command)
	}
	// The command is appended under a span that continues the payment's
	// trace (linked to the scan's span, if any): payment-svc applies it,
	// and the order hears of it, in the order's trace.
	ctx, opts := kit.ContinueTrace(ctx, r.Row.Traceparent)
	ctx, span := tracer.Start(ctx, "repair "+string(d.Command), append(opts, trace.WithAttributes(
		attribute.Int64("concord.payment_id", r.Row.PaymentID), attribute.Int64("concord.finding_id", id),
		attribute.String("concord.correlation_id", r.Row.OrderID)))...)
	defer span.End()
	// s.Outbox carries the topic prefix (--topic-prefix), so commands land
	// where a side-by-side payment-svc consumes them.
	env, err := s.Outbox.Append(ctx, tx, outbox.Event{
		Payload:       payload,
		AggregateID:   strconv.FormatInt(r.Row.PaymentID, 10),
		CorrelationID: r.Row.OrderID,
		Headers:       map[string]string{"source": "reconciler:" + string(source)},
	})
	if err != nil {
		return false, false, fmt.Errorf("payment %d: finding %d: emit %s: %w", r.Row.PaymentID, id, d.Command, err)
	}
	if _, err := tx.Exec(ctx, `update reconciliation_findings set command_event_id = $2 where id = $1`, id, env.EventID); err != nil {
		return false, false, fmt.Errorf("payment %d: finding %d: link command %s: %w", r.Row.PaymentID, id, env.EventID, err)
	}
	return true, true, nil
}

// CompleteCycle moves the cursor back to the start and records the cycle's
// completion, by compare-and-set on the position read.
func (s *Store) CompleteCycle(ctx context.Context, job string, cursorID int64) error {
	return CompleteCycle(ctx, s.pool, job, cursorID)
}

// ReadCursor creates the job's cursor on first use and reads its position
// and the database's clock, in tx. The broker rail's store in the funding
// database keeps a cursor table of the same shape and uses these too.
func ReadCursor(ctx context.Context, tx pgx.Tx, job string) (lastID int64, now time.Time, err error) {
	if _, err := tx.Exec(ctx, `insert into reconciliation_cursor (job) values ($1) on conflict do nothing`, job); err != nil {
		return 0, now, fmt.Errorf("create cursor: %w", err)
	}
	if err := tx.QueryRow(ctx, `select last_id, now() from reconciliation_cursor where job = $1`, job).Scan(&lastID, &now); err != nil {
		return 0, now, fmt.Errorf("read cursor: %w", err)
	}
	return lastID, now, nil
}

// AdvanceCursor moves the job's cursor from → to by compare-and-set in tx;
// a cursor no longer at from is ErrConcurrentRun.
func AdvanceCursor(ctx context.Context, tx pgx.Tx, job string, from, to int64) error {
	tag, err := tx.Exec(ctx, `update reconciliation_cursor set last_id = $3, updated_at = now()
		where job = $1 and last_id = $2`, job, from, to)
	if err != nil {
		return fmt.Errorf("advance cursor %d → %d: %w", from, to, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("cursor is no longer at id %d: %w", from, reconciler.ErrConcurrentRun)
	}
	return nil
}

// CompleteCycle moves the job's cursor from cursorID back to 0 and records
// the cycle's completion, by compare-and-set.
func CompleteCycle(ctx context.Context, pool *pgxpool.Pool, job string, cursorID int64) error {
	tag, err := pool.Exec(ctx, `update reconciliation_cursor
		set last_id = 0, last_cycle_completed_at = now(), last_cycle_duration = now() - cycle_started_at,
		    cycle_started_at = now(), cycles_completed = cycles_completed + 1, updated_at = now()
		where job = $1 and last_id = $2`, job, cursorID)
	if err != nil {
		return fmt.Errorf("reconciler store: job %s: complete cycle: %w", job, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("reconciler store: job %s: cursor is no longer at id %d: %w", job, cursorID, reconciler.ErrConcurrentRun)
	}
	return nil
}

// RowsByProviderID reads the payments tied to the given provider ids, and
// the database's clock.
func (s *Store) RowsByProviderID(ctx context.Context, ids []string) ([]reconciler.Row, time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `select now()`).Scan(&now); err != nil {
		return nil, now, fmt.Errorf("reconciler store: clock: %w", err)
	}
	rows, err := s.pool.Query(ctx, `select `+rowCols+` from payments where provider_payment_id = any($1) order by id`, ids)
	if err != nil {
		return nil, now, fmt.Errorf("reconciler store: payments of %d provider ids: %w", len(ids), err)
	}
	out, err := scanRows(rows)
	if err != nil {
		return nil, now, fmt.Errorf("reconciler store: payments of %d provider ids: %w", len(ids), err)
	}
	return out, now, nil
}
