package schema

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Snapshot is one read transaction on the read pool: every query through it
// sees the database as one commit left it, while the writer goes on
// committing (WAL keeps the pages the snapshot reads). A dispute trace and a
// metrics scrape each read several tables and must describe one state.
type Snapshot struct{ tx *sqlx.Tx }

// Snapshot runs fn in one read transaction, ended when fn returns; fn must
// not keep s.
func (db *DB) Snapshot(ctx context.Context, fn func(s *Snapshot) error) error {
	tx, err := db.Read.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	return fn(&Snapshot{tx: tx})
}

// QueryContext, QueryxContext and QueryRowxContext let ledger's read
// functions, which still take a sqlx.QueryerContext, run inside a snapshot.
// They go once ledger reads through typed methods of its own storage files;
// nothing outside schema should call them with SQL of its own.

// QueryContext runs query in the snapshot.
func (s *Snapshot) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return s.tx.QueryContext(ctx, query, args...)
}

// QueryxContext runs query in the snapshot.
func (s *Snapshot) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	return s.tx.QueryxContext(ctx, query, args...)
}

// QueryRowxContext runs query in the snapshot.
func (s *Snapshot) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	return s.tx.QueryRowxContext(ctx, query, args...)
}
