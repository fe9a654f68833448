package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Writer is the single write connection's side of storage: the statements
// custody's writer runs for every delivery, prepared once (DB.OpenWriter),
// and the batch transactions it begins on them. Only one Writer may run at a
// time: the write pool has one connection, and SQLite one write lock.
type Writer struct {
	db    *sqlx.DB
	stmts writeStmts
}

// writeStmts are the hot path's statements: per delivery a receipt insert
// (holding the attempt that inserted it) and its usage rows, or, for a
// duplicate, the stored receipt's lookup and an attempt row; per batch one
// read and one update of the chain head.
type writeStmts struct {
	insertReceipt, storedReceipt, insertAttempt, insertRow, loadHead, saveHead *sql.Stmt
	insertOutbox                                                               *sql.Stmt // outbox.go: one per forwarded destination of a new receipt
	usageState, saveUsageState                                                 *sql.Stmt // entitlements.go: per customer, meter and month a batch touches
}

func (s *writeStmts) each(fn func(dst **sql.Stmt, query string)) {
	fn(&s.insertReceipt, insertReceiptSQL)
	fn(&s.storedReceipt, storedReceiptSQL)
	fn(&s.insertAttempt, insertAttemptSQL)
	fn(&s.insertRow, insertLedgerRowSQL)
	fn(&s.loadHead, latestHeadSQL)
	fn(&s.saveHead, saveHeadSQL)
	fn(&s.insertOutbox, insertOutboxSQL)
	fn(&s.usageState, usageStateSQL)
	fn(&s.saveUsageState, saveUsageStateSQL)
}

// OpenWriter prepares the writer's statements on the write connection. Close
// the Writer before the DB.
func (db *DB) OpenWriter(ctx context.Context) (*Writer, error) {
	if db.Write == nil {
		return nil, errors.New("schema: the database is open read-only")
	}
	w := &Writer{db: db.Write}
	var err error
	w.stmts.each(func(dst **sql.Stmt, query string) {
		if err == nil {
			*dst, err = db.Write.PrepareContext(ctx, forBackend(db.Write, query))
		}
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("prepare: %w", err)
	}
	return w, nil
}

// Close closes the prepared statements.
func (w *Writer) Close() error {
	var errs []error
	w.stmts.each(func(dst **sql.Stmt, _ string) {
		if *dst != nil {
			errs = append(errs, (*dst).Close())
			*dst = nil
		}
	})
	return errors.Join(errs...)
}

// Begin starts one batch transaction. The write connection's DSN carries
// _txlock=immediate, so this is BEGIN IMMEDIATE: the batch takes the write
// lock before its first read (the chain head), and no other connection can
// move the head or commit until it ends; nor can a read-then-write ever
// fail to upgrade its lock halfway. Because the pool has a single
// connection, binding the statements reuses what OpenWriter prepared.
//
// On PostgreSQL Begin sends nothing: the batch begins its transaction with
// its first statement, and first locks the chain head's row (and reads it,
// for LatestHead), whatever the batch then writes. Several receivers'
// batches, and invoice closes (CloseTx), so take their locks in one order,
// head first: a batch that locked a relay's rows before the head could
// deadlock with one that holds the head and wants those rows.
func (w *Writer) Begin(ctx context.Context) (Batch, error) {
	if onPostgres(w.db) {
		c, err := w.db.Connx(ctx)
		if err != nil {
			return Batch{}, err
		}
		pg := &pgBatch{conn: c, known: map[receiptKey]storedReceipt{}, absent: map[receiptKey]bool{}}
		return Batch{tx: batchTx{pg: pg}, pg: pg}, nil // pgbatch.go: it begins with its first statement
	}
	tx, err := w.db.BeginTxx(ctx, nil)
	if err != nil {
		return Batch{}, err
	}
	st := w.stmts // each bound to tx below
	st.each(func(dst **sql.Stmt, _ string) { *dst = tx.StmtContext(ctx, *dst) })
	return Batch{tx: batchTx{tx: tx}, st: &st}, nil
}

// Batch is the writer's batch transaction (Writer.Begin): the hot path's
// writes through the prepared statements (receipts.go, attempts.go,
// usage.go, chain.go), the replays' (replays.go), and the writes beside the
// hot path (reconcile checkpoints, redelivery requests, retention), each a
// typed method with no SQL of the caller's. The chain head and the refs of
// adjustments are read through it too (chain.go). The writer commits it.
type Batch struct {
	tx batchTx
	st *writeStmts // bound to tx (SQLite)
	pg *pgBatch    // the writes held back (PostgreSQL, pgbatch.go)
}

// Commit commits the batch: with synchronous=FULL it is durable when Commit
// returns. On PostgreSQL it first sends what the batch holds back, and a
// batch whose writes failed does not commit (ErrHeldBack).
func (b Batch) Commit() error {
	if b.pg != nil {
		return b.pg.commit(context.Background())
	}
	return b.tx.tx.Commit()
}

// Err is what failed the batch itself rather than one of its ops, and
// keeps it from committing: on PostgreSQL its begin (the head's lock, the
// read of its receipts) or the writes it held back (ErrHeldBack). It is
// nil on SQLite, whose batch has no such state.
func (b Batch) Err() error {
	if b.pg != nil {
		return b.pg.err
	}
	return nil
}

// Rollback abandons the batch; after Commit it does nothing.
func (b Batch) Rollback() error {
	if b.pg != nil {
		return b.pg.rollback()
	}
	if err := b.tx.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// Isolated runs fn inside a savepoint, so a failing fn undoes only its own
// writes and the rest of the batch can still commit. opErr is fn's error.
// txErr means the savepoint itself failed: fn's writes may still be in the
// transaction, and the batch must not commit.
func (b Batch) Isolated(ctx context.Context, fn func() error) (opErr, txErr error) {
	if _, err := b.tx.ExecContext(ctx, "SAVEPOINT op"); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	if b.pg != nil {
		b.pg.added = b.pg.added[:0]
	}
	opErr = fn()
	if opErr == nil && b.pg != nil {
		opErr = b.pg.flush(ctx) // inside the savepoint: its errors are the op's
	}
	if opErr != nil {
		if _, err := b.tx.raw().ExecContext(ctx, "ROLLBACK TO op"); err != nil {
			return opErr, fmt.Errorf("rollback to savepoint: %w", err)
		}
		if b.pg != nil { // what the savepoint undid, the batch no longer knows or holds
			for _, k := range b.pg.added {
				delete(b.pg.known, k)
				b.pg.absent[k] = true // read missing before the op, and the op is undone
			}
			b.pg.receipts, b.pg.attempts, b.pg.rows, b.pg.outbox, b.pg.err = b.pg.receipts[:0], b.pg.attempts[:0], b.pg.rows[:0], b.pg.outbox[:0], nil
		}
	}
	if _, err := b.tx.ExecContext(ctx, "RELEASE op"); err != nil {
		return opErr, fmt.Errorf("release savepoint: %w", err)
	}
	return opErr, nil
}

// DataVersion is SQLite's data_version on the write connection: it changes
// when another connection has committed since it was last read, and not for
// the connection's own commits. The writer's caches of what it wrote hold
// while it does not change (entitle.StateCache). Not on PostgreSQL, where
// several receivers write: ok is false there.
func (b Batch) DataVersion(ctx context.Context) (v int64, ok bool, err error) {
	if b.pg != nil {
		return 0, false, nil
	}
	err = b.tx.tx.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v)
	return v, err == nil, err
}
