package idempotent

import (
	"context"
	"embed"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/pgmigrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// VersionTable is the tern version table of this component's migrations.
const VersionTable = "idempotent_schema_version"

// Migrate creates or upgrades processed_events and dead_letters. It is safe
// to call from several processes at start-up.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrations, "migrations")
}
