// Package pgmigrate applies a component's embedded SQL migrations at
// start-up with jackc/tern. Each component (outbox, processed_events,
// payments, …) keeps its own version table, so several components can share
// one database and evolve independently.
package pgmigrate

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

// ApplyDir is Apply for migrations kept in a directory of an embedded file
// system (//go:embed migrations/*.sql), the layout every component uses.
func ApplyDir(ctx context.Context, pool *pgxpool.Pool, versionTable string, fsys fs.FS, dir string) error {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", versionTable, err)
	}
	return Apply(ctx, pool, versionTable, sub)
}

// lockKey serialises migrations of every component in a database: two
// processes starting at once must not both create a version table.
const lockKey = 0x636f6e636f7264 // "concord"

// Apply runs the migrations in fsys (files named 001_name.sql, 002_….sql at
// its root) that versionTable does not record yet. It is safe to call from
// several processes at once.
func Apply(ctx context.Context, pool *pgxpool.Pool, versionTable string, fsys fs.FS) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", versionTable, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "select pg_advisory_lock($1)", int64(lockKey)); err != nil {
		return fmt.Errorf("migrate %s: lock: %w", versionTable, err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "select pg_advisory_unlock($1)", int64(lockKey)) //nolint:errcheck // released with the session anyway

	m, err := migrate.NewMigrator(ctx, conn.Conn(), versionTable)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", versionTable, err)
	}
	if err := m.LoadMigrations(fsys); err != nil {
		return fmt.Errorf("migrate %s: load: %w", versionTable, err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", versionTable, err)
	}
	return nil
}
