package schema

import (
	"context"
	"database/sql"
	"fmt"
)

// View runs fn in one read-only transaction on the read pool, ended when fn
// returns; fn must not keep tx. Every read through tx sees the database as
// one commit left it while the writer goes on committing (WAL keeps the
// pages it reads): a dispute trace and a metrics scrape each read several
// tables and must describe one state.
func (db *DB) View(ctx context.Context, fn func(tx *ReadTx) error) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if db.Postgres() {
		opts.Isolation = sql.LevelRepeatableRead // one snapshot for every statement, as WAL gives SQLite
	}
	tx, err := db.Read.BeginTxx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback()
	return fn(ReadTxOf(tx))
}
