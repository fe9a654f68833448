package schema

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// The migrations that created the tables a read-only open of an older
// database can lack.
const (
	versionInvoices  = 2 // period_closes, invoices, invoice_lines
	versionReconcile = 3 // reconcile_checkpoints, redelivery_requests, replays, prune_runs
	versionChained   = 5 // chain_head
	// chain_head.payload_pruned_before (a column, not a table: reads that
	// need it fall back on older databases).
	versionPayloadPruned = 10
	// outbox_delivered: each destination's delivered messages counted.
	versionOutboxDelivered = 35
)

// SchemaVersion is the newest migration applied to the database: 0 for a
// database hookledger has never migrated. A read-only open does not migrate,
// so a read-only database can be older than this binary.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, db.Read)
}

func schemaVersion(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	if ok, err := migrationsTable(ctx, q); err != nil || !ok {
		return 0, err
	}
	var v int
	if err := sqlx.GetContext(ctx, q, &v, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`); err != nil {
		return 0, err
	}
	return v, nil
}

// migrationsTable reports whether the database has its schema_migrations
// table: hookledger has migrated it at least once.
func migrationsTable(ctx context.Context, q sqlx.QueryerContext) (bool, error) {
	query := `SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations')`
	if onPostgres(q) {
		query = `SELECT to_regclass('schema_migrations') IS NOT NULL`
	}
	var ok bool
	err := sqlx.GetContext(ctx, q, &ok, query)
	return ok, err
}

// onPostgres reports whether a handle (a pool, a transaction) is
// PostgreSQL's, for the few statements the engines spell differently.
func onPostgres(q any) bool {
	h, ok := q.(interface{ DriverName() string })
	return ok && h.DriverName() == pgDriverName
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
	ms, err := db.Migrations()
	if err != nil {
		return nil, err
	}
	return pending(ctx, db.Read, ms)
}
