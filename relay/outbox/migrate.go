package outbox

import (
	"context"
	"embed"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/concordhq/concord/infra/pgmigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// VersionTable is the tern version table of the outbox migrations.
const VersionTable = "outbox_schema_version"

// Migrate creates or upgrades the outbox table in the pool's database. It is
// safe to call from every service and relay at start-up, concurrently.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgmigrate.ApplyDir(ctx, pool, VersionTable, migrationFiles, "migrations")
}
