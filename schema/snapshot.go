package schema

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// View runs fn in one read-only transaction on the read pool, ended when fn
// returns; fn must not keep tx. Every read through tx sees the database as
// one commit left it while the writer goes on committing (WAL keeps the
// pages it reads): a dispute trace and a metrics scrape each read several
// tables and must describe one state.
func (db *DB) View(ctx context.Context, fn func(tx *ReadTx) error) error {
	tx, err := db.Read.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	return fn(ReadTxOf(tx))
}

// ReadTx is one read-only snapshot: reads through it agree with each other
// even while the writer commits.
//
// ReadTx and ReadTxOf are declared here until the ledger's storage move
// (schema/ledger.go) declares them with the ledger's reads; so are the
// QueryContext, QueryxContext and QueryRowxContext below, which let ledger's
// read functions that still take a sqlx.QueryerContext run in the snapshot.
// Nothing outside schema calls them with SQL of its own.
type ReadTx struct{ tx *sqlx.Tx }

// ReadTxOf reads through tx, a transaction begun on the read pool.
func ReadTxOf(tx *sqlx.Tx) *ReadTx { return &ReadTx{tx: tx} }

// QueryContext runs query in the snapshot.
func (tx *ReadTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return tx.tx.QueryContext(ctx, query, args...)
}

// QueryxContext runs query in the snapshot.
func (tx *ReadTx) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	return tx.tx.QueryxContext(ctx, query, args...)
}

// QueryRowxContext runs query in the snapshot.
func (tx *ReadTx) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	return tx.tx.QueryRowxContext(ctx, query, args...)
}
