package schema

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// versionReconcile is the migration that created reconcile_checkpoints,
// redelivery_requests, replays and prune_runs.
const versionReconcile = 3

// SchemaVersion is the newest migration applied to the database: 0 for a
// database hookledger has never migrated. A read-only open does not migrate,
// so a read-only database can be older than this binary.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, db.Read)
}

func schemaVersion(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	var exists bool
	if err := sqlx.GetContext(ctx, q, &exists,
		`SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations')`); err != nil {
		return 0, err
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := sqlx.GetContext(ctx, q, &v, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`); err != nil {
		return 0, err
	}
	return v, nil
}

// predates reports whether the database is older than migration version, so
// the tables it created are missing: a query of them that failed found
// nothing rather than failing. Asked only after an error, it costs the
// queries that succeed nothing.
func predates(ctx context.Context, q sqlx.QueryerContext, version int) bool {
	v, err := schemaVersion(ctx, q)
	return err == nil && v < version
}

// PendingMigrations lists the embedded migrations not yet applied.
func (db *DB) PendingMigrations(ctx context.Context) ([]Migration, error) {
	return Pending(ctx, db.Read)
}
