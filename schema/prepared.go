package schema

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jmoiron/sqlx"
)

// prepared runs statements on the read pool prepared once each, by text:
// database/sql keeps a prepared statement per connection, preparing it
// again on a connection the first time it runs there. It is for the reads
// that serve runs thousands of times a second and whose preparation cost
// more than their run (the entitlement check's: SQLite parsed and planned
// each of its four statements on every check). It is a sqlx.QueryerContext,
// so the same read functions run on it, on the pool or in a transaction.
type prepared struct {
	pool  *sqlx.DB
	mu    sync.Mutex
	stmts map[string]*sqlx.Stmt
}

func newPrepared(pool *sqlx.DB) *prepared {
	return &prepared{pool: pool, stmts: map[string]*sqlx.Stmt{}}
}

// stmt is query prepared, nil when it does not prepare (the caller then
// runs it unprepared, which reports the error as any other read does: a
// database older than the table it reads, for one).
func (p *prepared) stmt(ctx context.Context, query string) *sqlx.Stmt {
	p.mu.Lock()
	st, ok := p.stmts[query]
	p.mu.Unlock()
	if ok {
		return st
	}
	// Prepared outside the lock, which the other reads' lookups take.
	st, err := p.pool.PreparexContext(ctx, query)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.stmts[query]; ok { // another read prepared it meanwhile
		st.Close()
		return prev
	}
	p.stmts[query] = st
	return st
}

func (p *prepared) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.pool.QueryContext(ctx, query, args...)
}

func (p *prepared) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryxContext(ctx, args...)
	}
	return p.pool.QueryxContext(ctx, query, args...)
}

func (p *prepared) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryRowxContext(ctx, args...)
	}
	return p.pool.QueryRowxContext(ctx, query, args...)
}

// close closes the statements (before the pool).
func (p *prepared) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for q, st := range p.stmts {
		errs = append(errs, st.Close())
		delete(p.stmts, q)
	}
	return errors.Join(errs...)
}

// hotRead is one statement of a group readHot runs, and the slice its rows
// go into (a pointer to a slice of structs with db tags).
type hotRead struct {
	query string
	args  []any
	into  any
}

// readHot runs reads on the read pool, in order: on SQLite each prepared
// once (db.hot), on PostgreSQL pipelined on one connection, so that the
// group costs one round trip to the server instead of one per statement
// (pgx prepares each statement once per connection too). Each statement
// sees every transaction committed before it starts, as the same reads
// made one by one would.
func (db *DB) readHot(ctx context.Context, reads ...hotRead) error {
	if !db.Postgres() {
		for _, r := range reads {
			if err := sqlx.SelectContext(ctx, db.hot, r.into, r.query, r.args...); err != nil {
				return err
			}
		}
		return nil
	}
	conn, err := db.Read.Connx(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return pipeline(conn, func(c *pgx.Conn) error {
		b := &pgx.Batch{}
		for _, r := range reads {
			b.Queue(sqlx.Rebind(sqlx.DOLLAR, r.query), r.args...)
		}
		br := c.SendBatch(ctx, b)
		defer br.Close()
		for _, r := range reads {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			err = sqlx.StructScan(pgxRows{rows}, r.into)
			rows.Close()
			if err != nil {
				return err
			}
		}
		return br.Close()
	})
}

// pgxRows is pgx's rows as sqlx scans them into structs.
type pgxRows struct{ pgx.Rows }

func (r pgxRows) Close() error { r.Rows.Close(); return r.Rows.Err() }

func (r pgxRows) Columns() ([]string, error) {
	fs := r.FieldDescriptions()
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return names, nil
}
