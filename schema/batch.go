package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jmoiron/sqlx"
)

// Writer is the single write connection's side of storage: the batch
// transactions custody's writer begins on it, and on SQLite the statements
// those batches run, prepared once each on the write connection (stmtCache).
// Only one Writer may run at a time: the write pool has one connection, and
// SQLite one write lock.
type Writer struct {
	db       *sqlx.DB
	stmts    *stmtCache    // nil on PostgreSQL, where pgx prepares each statement once per connection
	registry *atomic.Int64 // DB.registry
	claims   *atomic.Int64 // DB.claims
}

// stmtCache holds the SQLite writer's statements, prepared once each on the
// write connection, by text. SQLite parses and plans a statement that is not
// prepared every time it runs, and on the writer that cost more than the
// run: the usage state's read, the Stripe pushes' inserts and the limit and
// spend reads ran per row or per customer of every batch (more than a
// quarter of the writer's CPU with limits, spend and Stripe configured).
//
// A statement a batch runs that is not prepared yet runs unprepared and is
// counted; the second time, it is prepared at the next Begin, while no batch
// holds the write pool's one connection (a prepare inside the batch would
// wait for it). At most maxWriterStmts are kept: a text built per call (a
// list of placeholders) then cannot crowd the memory.
type stmtCache struct {
	mu       sync.Mutex
	prepared map[string]*sql.Stmt
	seen     map[string]int // texts run unprepared, and how often
	due      []string       // texts run twice: prepare them
}

const maxWriterStmts = 256

// lookup returns q prepared, or nil after counting it.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.prepared[q]; ok || len(c.prepared) >= maxWriterStmts {
		return s
	}
	if n := c.seen[q]; n > 0 || len(c.seen) < 4*maxWriterStmts {
		c.seen[q] = n + 1
		if n == 1 {
			c.due = append(c.due, q)
		}
	}
	return nil
}

// prepare prepares on db the texts batches ran twice. One that does not
// prepare is forgotten: it failed when it ran too, and the batch that ran
// it said so.
func (c *stmtCache) prepare(ctx context.Context, db *sqlx.DB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range c.due {
		delete(c.seen, q)
		if len(c.prepared) >= maxWriterStmts {
			continue
		}
		if s, err := db.PrepareContext(ctx, q); err == nil {
			c.prepared[q] = s
		}
	}
	c.due = c.due[:0]
}

// OpenWriter opens the writer's side of the database. Close the Writer
// before the DB.
func (db *DB) OpenWriter(ctx context.Context) (*Writer, error) {
	if db.Write == nil {
		return nil, errors.New("schema: the database is open read-only")
	}
	w := &Writer{db: db.Write, registry: &db.registry, claims: &db.claims}
	if !onPostgres(db.Write) {
		w.stmts = &stmtCache{prepared: map[string]*sql.Stmt{}, seen: map[string]int{}}
	}
	return w, nil
}

// Close closes the prepared statements.
func (w *Writer) Close() error {
	if w.stmts == nil {
		return nil
	}
	w.stmts.mu.Lock()
	defer w.stmts.mu.Unlock()
	var errs []error
	for q, s := range w.stmts.prepared {
		errs = append(errs, s.Close())
		delete(w.stmts.prepared, q)
	}
	return errors.Join(errs...)
}

// Begin starts one batch transaction. The write connection's DSN carries
// _txlock=immediate, so this is BEGIN IMMEDIATE: the batch takes the write
// lock before its first read (the chain head), and no other connection can
// move the head or commit until it ends; nor can a read-then-write ever
// fail to upgrade its lock halfway. Because the pool has a single
// connection, binding a prepared statement to the batch reuses what was
// prepared on it.
//
// On PostgreSQL Begin sends nothing: the batch begins its transaction with
// its first statement, and first locks the chain head's row (and reads it,
// for LatestHead), whatever the batch then writes. Several receivers'
// batches, and invoice closes (CloseTx), so take their locks in one order,
// head first: a batch that locked a relay's rows before the head could
// deadlock with one that holds the head and wants those rows.
func (w *Writer) Begin(ctx context.Context) (Batch, error) {
	if w.stmts == nil {
		c, err := w.db.Connx(ctx)
		if err != nil {
			return Batch{}, err
		}
		pg := &pgBatch{conn: c, known: map[receiptKey]storedReceipt{}, absent: map[receiptKey]bool{}}
		return Batch{tx: batchTx{pg: pg}, pg: pg, claims: w.claims}, nil // pgbatch.go: it begins with its first statement
	}
	w.stmts.prepare(ctx, w.db)
	tx, err := w.db.BeginTxx(ctx, nil)
	if err != nil {
		return Batch{}, err
	}
	return Batch{tx: batchTx{tx: tx, st: &txStmts{cache: w.stmts, bound: map[string]*sqlx.Stmt{}}}, registry: w.registry, claims: w.claims}, nil
}

// Batch is the writer's batch transaction (Writer.Begin): the hot path's
// writes (receipts.go, attempts.go, usage.go, chain.go), the replays'
// (replays.go), and the writes beside the hot path (reconcile checkpoints,
// redelivery requests, retention), each a typed method with no SQL of the
// caller's. The chain head and the refs of adjustments are read through it
// too (chain.go). The writer commits it.
type Batch struct {
	tx       batchTx
	pg       *pgBatch      // the writes held back (PostgreSQL, pgbatch.go)
	registry *atomic.Int64 // DB.registry (SQLite)
	claims   *atomic.Int64 // DB.claims
}

// Claims is how many claims of outbox messages this process has made
// (DB.claims): a count other than the one a cache of open Stripe pushes
// was filled at means a claim may have closed them since.
func (b Batch) Claims() int64 { return b.claims.Load() }

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

// DataVersion says what changed that the writer did not write itself:
// SQLite's data_version on the write connection, which changes when another
// connection has committed since it was last read (not for the
// connection's own commits), and the registry writes of this process
// (DB.registry), which commit on that same connection. The writer's caches
// of what it read hold while it does not change (entitle.StateCache). Not
// on PostgreSQL, where several receivers write: ok is false there.
func (b Batch) DataVersion(ctx context.Context) (v DataVersion, ok bool, err error) {
	if b.pg != nil {
		return v, false, nil
	}
	v.Registry = b.registry.Load()
	err = b.tx.QueryRowContext(ctx, `PRAGMA data_version`).Scan(&v.SQLite)
	return v, err == nil, err
}

// DataVersion is Batch.DataVersion's answer; equal versions mean nothing
// changed.
type DataVersion struct{ SQLite, Registry int64 }
