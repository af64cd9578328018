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

// Apply runs the migrations in fsys (files named 001_name.sql, 002_….sql at
// its root) that versionTable does not record yet. It is safe to call from
// several processes at once: tern holds a Postgres advisory lock while it
// creates the version table and while it migrates.
func Apply(ctx context.Context, pool *pgxpool.Pool, versionTable string, fsys fs.FS) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", versionTable, err)
	}
	defer conn.Release()
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
