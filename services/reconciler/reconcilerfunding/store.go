// Package reconcilerfunding is the reconciler's record in the funding
// database, for the broker rail: the keyset cursor over funding_movements,
// the findings, and the repair commands (funding.apply_broker_status),
// appended to the same database's outbox in the transaction that records
// their finding; funding-svc's relay publishes them and its consumer
// applies them through the canonical writer. The reconciler never writes
// funding's own tables.
package reconcilerfunding

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/pgmigrate"
	"github.com/concordhq/concord/relay/outbox"
	"github.com/concordhq/concord/schemas/contract"
	"github.com/concordhq/concord/services/funding"
	"github.com/concordhq/concord/services/reconciler"
	"github.com/concordhq/concord/services/reconciler/reconcilerstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which of these migrations ran.
const VersionTable = "reconciler_broker_schema_version"

// Migrate creates or updates the reconciler's tables in the funding
// database; the funding tables (fundingstore.Migrate) and the outbox must
// exist first.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// Store implements reconciler.BrokerStore on the funding database.
type Store struct {
	pool *pgxpool.Pool
	// Outbox routes the repair commands (its topic prefix).
	Outbox outbox.Writer
}

// New returns a Store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

var _ reconciler.BrokerStore = (*Store)(nil)

const movementCols = `id, domain, coalesce(broker_id, ''), account_id, direction, amount, currency, status, created_at, updated_at`

func scanMovements(rows pgx.Rows) ([]reconciler.Movement, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (reconciler.Movement, error) {
		var m reconciler.Movement
		var d, st string
		err := r.Scan(&m.ID, &d, &m.BrokerID, &m.AccountID, &m.Direction, &m.Amount, &m.Currency, &st, &m.CreatedAt, &m.UpdatedAt)
		m.Domain, m.Status = funding.Domain(d), funding.Status(st)
		return m, err
	})
}

// ReadMovements reads the job's cursor and the next limit movements by id
// in one short transaction.
func (s *Store) ReadMovements(ctx context.Context, job string, limit int) (reconciler.MovementPage, error) {
	page := reconciler.MovementPage{Job: job}
	var err error
	page.CursorID, page.Now, page.Rows, err = reconcilerstore.ReadAfterCursor(ctx, s.pool, job, "movements",
		`select `+movementCols+` from funding_movements where id > $1 order by id limit $2`, limit, scanMovements)
	if err != nil {
		return reconciler.MovementPage{}, err
	}
	return page, nil
}

// RecordMovements advances the cursor by compare-and-set, then records the
// results, in one transaction (see reconcilerstore.Store.Record).
func (s *Store) RecordMovements(ctx context.Context, page reconciler.MovementPage, results []reconciler.MovementResult) (reconciler.RecordStats, error) {
	if len(page.Rows) == 0 {
		return reconciler.RecordStats{}, nil
	}
	next := page.Rows[len(page.Rows)-1].ID
	return reconcilerstore.RecordPage(ctx, s.pool, page.Job, page.CursorID, next, func(tx pgx.Tx) (reconciler.RecordStats, error) {
		return s.apply(ctx, tx, reconciler.SourceScan, results)
	})
}

// RecordMovementFindings records results without a cursor (heal).
func (s *Store) RecordMovementFindings(ctx context.Context, source reconciler.Source, results []reconciler.MovementResult) (reconciler.RecordStats, error) {
	return reconcilerstore.RecordWithoutCursor(ctx, s.pool, source, func(tx pgx.Tx) (reconciler.RecordStats, error) {
		return s.apply(ctx, tx, source, results)
	})
}

// apply records the verified results in tx. A movement whose status or
// updated_at changed since it was read is left alone (Moved): its news
// most likely just arrived, and the next visit decides. A record the
// mirror did not hold is recorded unless the mirror holds it now.
func (s *Store) apply(ctx context.Context, tx pgx.Tx, source reconciler.Source, results []reconciler.MovementResult) (reconciler.RecordStats, error) {
	stats := reconciler.RecordStats{ByKind: map[reconciler.Kind]int{}, Commands: map[reconciler.Command]int{}}
	var inSync []int64
	var syncDomains, syncIDs []string
	for _, r := range results {
		if !r.Decision.Verified {
			continue
		}
		still, err := unchanged(ctx, tx, r)
		if err != nil {
			return stats, err
		}
		if !still {
			stats.Moved++
			continue
		}
		stats.Verified++
		switch {
		case r.Decision.Verdict == reconciler.InSync && r.Known:
			inSync = append(inSync, r.Movement.ID)
			syncDomains, syncIDs = append(syncDomains, string(r.Movement.Domain)), append(syncIDs, r.Movement.BrokerID)
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
		// A finding whose row was folded into its intent's (movement_id
		// set null) is found by its broker record.
		tag, err := tx.Exec(ctx, `update reconciliation_findings
			set resolved_at = now(), resolution = 'cleared', resolved_by = 'reconciler',
			    note = 'verified in sync by a later ' || $2
			where resolved_at is null and (movement_id = any($1)
			   or (movement_id is null and broker_id <> '' and (domain, broker_id) in (select * from unnest($3::text[], $4::text[]))))`,
			inSync, string(source), syncDomains, syncIDs)
		if err != nil {
			return stats, fmt.Errorf("clear findings of %d in-sync movements: %w", len(inSync), err)
		}
		stats.FindingsCleared = int(tag.RowsAffected())
	}
	return stats, nil
}

// unchanged reports whether the mirror still holds r's movement as it was
// read (or still holds no row for a record it did not know).
func unchanged(ctx context.Context, tx pgx.Tx, r reconciler.MovementResult) (bool, error) {
	var n int
	var err error
	if r.Known {
		err = tx.QueryRow(ctx, `select count(*) from funding_movements where id = $1 and status = $2 and updated_at = $3`,
			r.Movement.ID, string(r.Movement.Status), r.Movement.UpdatedAt).Scan(&n)
		return n == 1, err
	}
	err = tx.QueryRow(ctx, `select count(*) from funding_movements where domain = $1 and broker_id = $2`,
		string(r.Broker.Domain), r.Broker.BrokerID).Scan(&n)
	return n == 0, err
}

// openFinding inserts the finding unless the same one is open, and for a
// new Repairable finding appends its command in the same transaction.
func (s *Store) openFinding(ctx context.Context, tx pgx.Tx, source reconciler.Source, r reconciler.MovementResult) (opened, emitted bool, err error) {
	d := r.Decision
	var cmd *string
	if d.Verdict == reconciler.Repairable {
		c := string(d.Command)
		cmd = &c
	}
	domain, brokerID, account, local := r.Broker.Domain, r.Broker.BrokerID, r.Broker.AccountID, "NONE"
	var movement *int64
	if r.Known {
		domain, brokerID, account, local = r.Movement.Domain, r.Movement.BrokerID, r.Movement.AccountID, string(r.Movement.Status)
		if local == "" {
			local = "NONE"
		}
		movement = &r.Movement.ID
	}
	var id int64
	var detected time.Time
	err = tx.QueryRow(ctx, `insert into reconciliation_findings
			(domain, broker_id, account_id, movement_id, kind, verdict, local_status, external_status, repair_command, source)
		values ($1, $2, $3, $4, $5, $6, $7, nullif($8, ''), $9, $10)
		on conflict (domain, broker_id, (coalesce(movement_id, 0)), kind) where resolved_at is null do nothing
		returning id, detected_at`,
		string(domain), brokerID, account, movement, string(d.Kind), string(d.Verdict), local, r.Broker.Status, cmd, string(source)).Scan(&id, &detected)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("%s %s: record finding %s: %w", domain, brokerID, d.Kind, err)
	}
	if cmd == nil {
		return true, false, nil
	}
	p := contract.FundingApplyBrokerStatusV1{AccountID: account, Domain: contract.FundingApplyBrokerStatusV1Domain(domain),
		BrokerID: brokerID, BrokerStatus: r.Broker.Status, FindingID: id, Kind: string(d.Kind),
		ExpectedLocalStatus: contract.FundingApplyBrokerStatusV1ExpectedLocalStatus(local), DetectedAt: detected.UTC()}
	if !r.Known {
		// The writer mirrors a record it does not hold from its description.
		amount := r.Broker.Amount
		p.Direction, p.Amount, p.Currency = contract.FundingApplyBrokerStatusV1Direction(r.Broker.Direction), &amount, r.Broker.Currency
	}
	env, err := s.Outbox.Append(ctx, tx, outbox.Event{
		Payload:       p,
		AggregateID:   account,
		CorrelationID: brokerID,
		Headers:       map[string]string{"source": "reconciler:" + string(source)},
	})
	if err != nil {
		return false, false, fmt.Errorf("%s %s: finding %d: emit %s: %w", domain, brokerID, id, d.Command, err)
	}
	if _, err := tx.Exec(ctx, `update reconciliation_findings set command_event_id = $2 where id = $1`, id, env.EventID); err != nil {
		return false, false, fmt.Errorf("%s %s: finding %d: link command %s: %w", domain, brokerID, id, env.EventID, err)
	}
	return true, true, nil
}

// CompleteCycle moves the cursor back to the start by compare-and-set.
func (s *Store) CompleteCycle(ctx context.Context, job string, cursorID int64) error {
	return reconcilerstore.CompleteCycle(ctx, s.pool, job, cursorID)
}

// MovementsByBrokerID reads the movements of refs and the database's clock.
func (s *Store) MovementsByBrokerID(ctx context.Context, refs []reconciler.BrokerRef) ([]reconciler.Movement, time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `select now()`).Scan(&now); err != nil {
		return nil, now, fmt.Errorf("reconciler store: clock: %w", err)
	}
	domains, ids := make([]string, len(refs)), make([]string, len(refs))
	for i, r := range refs {
		domains[i], ids[i] = string(r.Domain), r.BrokerID
	}
	rows, err := s.pool.Query(ctx, `select `+movementCols+` from funding_movements
		where (domain, broker_id) in (select * from unnest($1::text[], $2::text[])) order by id`, domains, ids)
	if err != nil {
		return nil, now, fmt.Errorf("reconciler store: movements of %d broker ids: %w", len(refs), err)
	}
	out, err := scanMovements(rows)
	if err != nil {
		return nil, now, fmt.Errorf("reconciler store: movements of %d broker ids: %w", len(refs), err)
	}
	return out, now, nil
}

// Accounts lists the accounts the mirror holds movements of.
func (s *Store) Accounts(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `select distinct account_id from funding_movements order by 1`)
	if err != nil {
		return nil, fmt.Errorf("reconciler store: accounts: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("reconciler store: accounts: %w", err)
	}
	return out, nil
}

// Finding is one finding of the broker rail.
type Finding struct {
	ID             int64
	Domain         funding.Domain
	BrokerID       string
	AccountID      string
	Kind           reconciler.Kind
	Verdict        reconciler.Verdict
	LocalStatus    string
	ExternalStatus string
	Source         reconciler.Source
	DetectedAt     time.Time
	Resolution     reconciler.Resolution
}

// Findings lists the open findings (all: resolved ones too), newest
// first, at most limit.
func (s *Store) Findings(ctx context.Context, all bool, limit int) ([]Finding, error) {
	rows, err := s.pool.Query(ctx, `select id, domain, broker_id, account_id, kind, verdict, local_status,
			coalesce(external_status, ''), source, detected_at, coalesce(resolution, '')
		from reconciliation_findings where $1 or resolved_at is null order by id desc limit $2`, all, limit)
	if err != nil {
		return nil, fmt.Errorf("reconciler store: findings: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Finding, error) {
		var f Finding
		var d, k, v, src, res string
		err := r.Scan(&f.ID, &d, &f.BrokerID, &f.AccountID, &k, &v, &f.LocalStatus, &f.ExternalStatus, &src, &f.DetectedAt, &res)
		f.Domain, f.Kind, f.Verdict = funding.Domain(d), reconciler.Kind(k), reconciler.Verdict(v)
		f.Source, f.Resolution = reconciler.Source(src), reconciler.Resolution(res)
		return f, err
	})
}

// Status reads the broker rail's lag (reconciler.MovementLag for job's
// cursor), its cursors and its open findings, for the gauges of
// `reconciler broker run`. Payments stays 0: this database holds none.
func (s *Store) Status(ctx context.Context, job string) (reconciler.Status, error) {
	var st reconciler.Status
	var oldest, cycleStart *time.Time
	err := s.pool.QueryRow(ctx, `select now(), (select min(created_at) from funding_movements),
			(select last_cycle_completed_at - last_cycle_duration from reconciliation_cursor where job = $1)`, job).
		Scan(&st.Now, &oldest, &cycleStart)
	if err != nil {
		return st, fmt.Errorf("reconciler store: job %s: lag: %w", job, err)
	}
	st.Lag = reconciler.MovementLag(st.Now, oldest, cycleStart)
	return st, reconcilerstore.New(s.pool).CursorsAndFindings(ctx, &st)
}
