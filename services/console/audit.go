package console

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable records which console migrations ran.
const VersionTable = "console_schema_version"

// Migrate creates or updates the console's own tables (the audit log) in
// the console's database.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}

// AuditEntry is one operator action.
type AuditEntry struct {
	ID      int64
	At      time.Time
	Actor   string
	Action  string // outbox.retry, outbox.skip, dlq.replay, finding.resolve
	Service string
	Target  string // the row acted on: an outbox id, dead-letter ids, a finding id
	Reason  string
	Outcome string
}

// Audit actions.
const (
	ActionOutboxRetry    = "outbox.retry"
	ActionOutboxSkip     = "outbox.skip"
	ActionDLQReplay      = "dlq.replay"
	ActionFindingResolve = "finding.resolve"
)

func recordAudit(ctx context.Context, pool *pgxpool.Pool, e AuditEntry) error {
	_, err := pool.Exec(ctx, `insert into console_audit (actor, action, service, target, reason, outcome)
		values ($1, $2, $3, $4, $5, $6)`, e.Actor, e.Action, e.Service, e.Target, e.Reason, e.Outcome)
	if err != nil {
		return fmt.Errorf("audit %s of %s %s by %s: %w", e.Action, e.Service, e.Target, e.Actor, err)
	}
	return nil
}

// RecentAudit returns the newest limit entries, newest first.
func RecentAudit(ctx context.Context, pool *pgxpool.Pool, limit int) ([]AuditEntry, error) {
	rows, err := pool.Query(ctx, `select id, at, actor, action, service, target, reason, outcome
		from console_audit order by id desc limit $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		err := r.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Service, &e.Target, &e.Reason, &e.Outcome)
		return e, err
	})
}
