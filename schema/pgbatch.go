package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"
)

// On PostgreSQL every statement is a round trip to the server, and the
// writer's batch holds the chain head's row lock for as long as it runs, so
// a batch that wrote each delivery's receipt, attempt and usage rows one
// statement at a time would cost three round trips per delivery while every
// other receiver waits. Instead the batch holds those writes back and sends
// them as one statement per table over arrays (unnest), and it learns which
// receipts exist from one read of all the batch's keys (Expect) instead of
// one insert each.
//
// That read decides nothing by itself: it is exact because the batch holds
// the chain head's lock, which every batch takes first (pgBatch.begin), and
// the unique key still decides: a receipt the read missed fails the
// held-back insert, and with it the batch (the writer then runs it again,
// one op at a time).
//
// Anything else the batch runs (a replay's read, a checkpoint) first sends
// what is held back (batchTx), so every statement sees the batch's own
// writes in order. A batch of deliveries costs two round trips: its first
// statements (BEGIN, the head's lock, the read) and its last (the held-back
// writes, COMMIT) are pipelined.

// receiptKey names a receipt.
type receiptKey struct{ provider, eventID string }

// storedReceipt is what a duplicate's attempt needs of the receipt it met.
type storedReceipt struct {
	sha    []byte
	status string
}

// ReceiptKey names one receipt a batch expects to insert (Batch.Expect).
type ReceiptKey struct{ Provider, EventID string }

// pgBatch is a PostgreSQL batch's held-back writes and what it knows of the
// receipts table.
type pgBatch struct {
	conn     *sqlx.Conn                   // the writer's, for this batch
	began    bool                         // begin has run
	beginErr error                        // and failed
	released bool                         // conn is back in the pool
	start    ChainHead                    // the head as begin locked it
	expected []ReceiptKey                 // keys Expect announced, not read yet
	known    map[receiptKey]storedReceipt // receipts that exist, or that this batch inserts
	absent   map[receiptKey]bool          // keys read and found missing (and not inserted since)
	receipts []pgReceipt
	attempts []Attempt
	rows     []LedgerRow
	outbox   []outboxRow
	head     *ChainHead   // a held-back SaveHead
	added    []receiptKey // known keys this batch inserted since the savepoint (Isolated)
	err      error        // a failed begin or flush: the batch must not commit
}

// batchTx is a batch's transaction: SQLite's database/sql transaction (tx),
// or on PostgreSQL the writer's connection inside a transaction the batch
// begins and ends itself (pg.conn), so that it can pipeline its first and
// last statements (pgBatch.begin, pgBatch.commit). On SQLite each statement
// through it runs the writer's prepared one when there is one (st); on
// PostgreSQL each first begins the transaction if it has not yet, and sends
// what the batch holds back.
type batchTx struct {
	tx *sqlx.Tx
	st *txStmts // SQLite
	pg *pgBatch
}

// txStmts are the writer's prepared statements (stmtCache) as one SQLite
// batch runs them: each bound to its transaction the first time it runs.
type txStmts struct {
	cache *stmtCache
	bound map[string]*sqlx.Stmt
}

// stmt is q prepared and bound to the batch's transaction, nil on
// PostgreSQL or while q is not prepared yet.
func (t batchTx) stmt(ctx context.Context, q string) *sqlx.Stmt {
	if t.st == nil {
		return nil
	}
	if s, ok := t.st.bound[q]; ok {
		return s
	}
	p := t.st.cache.lookup(q)
	if p == nil {
		return nil
	}
	s := &sqlx.Stmt{Stmt: t.tx.StmtContext(ctx, p), Mapper: t.tx.Mapper}
	t.st.bound[q] = s
	return s
}

// conn is what both kinds of transaction run statements on.
type conn interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryxContext(ctx context.Context, q string, args ...any) (*sqlx.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	QueryRowxContext(ctx context.Context, q string, args ...any) *sqlx.Row
	PrepareContext(ctx context.Context, q string) (*sql.Stmt, error)
}

// ready returns where the next statement goes: on PostgreSQL the batch's
// connection, once its transaction has begun and its held-back writes are
// sent.
func (t batchTx) ready(ctx context.Context) (conn, error) {
	if t.pg == nil {
		return t.tx, nil
	}
	if err := t.pg.begin(ctx); err != nil {
		return t.pg.conn, err
	}
	return t.pg.conn, t.pg.flush(ctx)
}

// raw is where a statement goes that must not first send what the batch
// holds back (ROLLBACK TO a savepoint).
func (t batchTx) raw() conn {
	if t.pg != nil {
		return t.pg.conn
	}
	return t.tx
}

// DriverName makes the transaction recognisable as PostgreSQL's (onPostgres).
func (t batchTx) DriverName() string {
	if t.pg != nil {
		return pgDriverName
	}
	return t.tx.DriverName()
}

func (t batchTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s := t.stmt(ctx, q); s != nil {
		return s.ExecContext(ctx, args...)
	}
	c, err := t.ready(ctx)
	if err != nil {
		return nil, err
	}
	return c.ExecContext(ctx, q, args...)
}

func (t batchTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryContext(ctx, args...)
	}
	c, err := t.ready(ctx)
	if err != nil {
		return nil, err
	}
	return c.QueryContext(ctx, q, args...)
}

func (t batchTx) QueryxContext(ctx context.Context, q string, args ...any) (*sqlx.Rows, error) {
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryxContext(ctx, args...)
	}
	c, err := t.ready(ctx)
	if err != nil {
		return nil, err
	}
	return c.QueryxContext(ctx, q, args...)
}

// QueryRowContext and QueryRowxContext cannot return a flush's error: it
// stays in the batch (pgBatch.err), which then refuses to commit.
func (t batchTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	c, _ := t.ready(ctx)
	return c.QueryRowContext(ctx, q, args...)
}

func (t batchTx) QueryRowxContext(ctx context.Context, q string, args ...any) *sqlx.Row {
	if s := t.stmt(ctx, q); s != nil {
		return s.QueryRowxContext(ctx, args...)
	}
	c, _ := t.ready(ctx)
	return c.QueryRowxContext(ctx, q, args...)
}

func (t batchTx) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	c, err := t.ready(ctx)
	if err != nil {
		return nil, err
	}
	return c.PrepareContext(ctx, q)
}

func (t batchTx) SelectContext(ctx context.Context, dest any, q string, args ...any) error {
	return sqlx.SelectContext(ctx, t, dest, q, args...)
}

func (t batchTx) GetContext(ctx context.Context, dest any, q string, args ...any) error {
	return sqlx.GetContext(ctx, t, dest, q, args...)
}

// Expect announces the receipts the batch's deliveries will insert, so that
// on PostgreSQL one read finds those that exist. SQLite, where each insert
// costs no round trip, never walks keys, so the writer builds nothing for it.
func (b Batch) Expect(keys iter.Seq[ReceiptKey]) {
	if b.pg != nil {
		for k := range keys {
			b.pg.expected = append(b.pg.expected, k)
		}
	}
}

// pipeline runs fn on conn (a PostgreSQL connection of the pool) as
// pgx's own, whose SendBatch sends several statements in one round trip.
func pipeline(conn *sqlx.Conn, fn func(c *pgx.Conn) error) error {
	return conn.Raw(func(dc any) error { return fn(dc.(interface{ pgxConn() *pgx.Conn }).pgxConn()) })
}

// pgxConn is the connection as pgx's own (pipeline; a test's wrapper of a
// rebindConn has it too).
func (c rebindConn) pgxConn() *pgx.Conn { return c.Conn.Conn() }

// begin begins the batch's transaction, if it has not yet, in one round
// trip: BEGIN, the chain head's lock (and its read, for LatestHead), and the
// read of the receipts Expect announced (lookup), pipelined. Every batch
// takes the head's lock first, so several receivers' batches take their
// locks in one order, and the read sees every batch committed before the
// lock was granted: in a pipeline each statement starts, and takes its
// snapshot, once the one before it is done. If begin fails, the connection
// is given up, so that no statement of the batch runs outside its
// transaction.
func (p *pgBatch) begin(ctx context.Context) error {
	if p.began {
		return p.beginErr
	}
	p.began = true
	keys := p.expected
	p.expected = nil
	err := pipeline(p.conn, func(c *pgx.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(latestHeadSQL + ` FOR UPDATE`)
		if len(keys) > 0 {
			b.Queue(pgLookupSQL, keyArrays(keys)...)
		}
		br := c.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		h := &p.start
		if err := br.QueryRow().Scan(&h.LedgerID, &h.LedgerHash, &h.ReceiptID, &h.ReceiptHash); err != nil {
			return fmt.Errorf("lock the chain head: %w", err)
		}
		if len(keys) > 0 {
			rows, err := br.Query()
			if err != nil {
				return fmt.Errorf("read the batch's receipts: %w", err)
			}
			err = p.read(rows, keys)
			rows.Close()
			if err != nil {
				return fmt.Errorf("read the batch's receipts: %w", err)
			}
		}
		return br.Close()
	})
	if err != nil {
		p.beginErr, p.err = err, err
		// BEGIN and the lock may have succeeded before a later part
		// failed: end the transaction (and the head's lock) first. On a
		// broken connection this fails at once, and the pool drops it.
		p.rollback()
	}
	return err
}

// ErrHeldBack marks a batch whose held-back writes the server refused
// (PostgreSQL), at Commit or when they were sent before another statement:
// nothing of the batch is stored, and it may run again one op at a time
// (Batch.Isolated) so that the op at fault fails alone.
var ErrHeldBack = errors.New("the batch's writes failed")

// commit sends what the batch holds back and COMMIT in one round trip. If
// the writes fail, the server skips the COMMIT (a pipeline stops at its
// first error), and a failed commit rolls the transaction back itself, so
// that the write pool's one connection is free again whatever the caller
// does next.
func (p *pgBatch) commit(ctx context.Context) error {
	if p.err != nil {
		p.rollback()
		return p.err
	}
	if !p.began && !p.holding() {
		p.release() // it read and wrote nothing
		return nil
	}
	if err := p.begin(ctx); err != nil {
		return err
	}
	query, args := p.pending()
	err := pipeline(p.conn, func(c *pgx.Conn) error {
		b := &pgx.Batch{}
		if query != "" {
			b.Queue(sqlx.Rebind(sqlx.DOLLAR, query), args...)
		}
		b.Queue("COMMIT")
		br := c.SendBatch(ctx, b)
		defer br.Close()
		if query != "" {
			if _, err := br.Exec(); err != nil {
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) {
					// The server refused the writes, so it skipped the
					// COMMIT behind them (a pipeline stops at its first
					// error): nothing is stored.
					return fmt.Errorf("%w: %s: %w", ErrHeldBack, heldBackWrites, err)
				}
				// Anything else (the connection broke) leaves the
				// outcome unknown: the COMMIT went out in the same round
				// trip and may have been applied. The batch must not run
				// again.
				return fmt.Errorf("commit: %s: %w", heldBackWrites, err)
			}
		}
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if tag.String() == "ROLLBACK" { // the transaction had failed before
			return errors.New("commit: the transaction was rolled back")
		}
		return br.Close()
	})
	if err != nil {
		p.rollback()
		return err
	}
	p.release()
	return nil
}

// rollback ends a batch that did not commit; after commit it does nothing.
func (p *pgBatch) rollback() error {
	if p.released {
		return nil
	}
	defer p.release()
	if !p.began {
		return nil
	}
	_, err := p.conn.ExecContext(context.Background(), "ROLLBACK")
	return err
}

// release hands the connection back to the write pool, which drops it if
// it is broken or still inside a transaction (pgx's ResetSession).
func (p *pgBatch) release() {
	if !p.released {
		p.released = true
		p.conn.Close()
	}
}

// pgLookupSQL reads which of a batch's keys have receipts: one probe of the
// unique (provider, hookledger_key(event_id)) btree per key (migration 0013;
// the raw id is compared too, as byEventKey does), whatever the table's
// size.
// As a plain join the planner hashed the keys and read the whole table for
// every batch until it held thousands of receipts, and for as long as a
// prepared plan made while it was empty lasted (until autovacuum's first
// ANALYZE, a minute or more): throughput fell with every receipt stored.
// LIMIT keeps the lateral subquery from being flattened into that join.
var pgLookupSQL = sqlx.Rebind(sqlx.DOLLAR, `SELECT k.provider, k.event_id, r.body_sha256, r.status
	FROM unnest(?::text[], ?::text[]) AS k (provider, event_id)
	CROSS JOIN LATERAL (SELECT body_sha256, status FROM receipts
		WHERE provider = k.provider AND hookledger_key(event_id) = hookledger_key(k.event_id) AND event_id = k.event_id LIMIT 1) AS r`)

func keyArrays(keys []ReceiptKey) []any {
	providers, ids := make([]string, len(keys)), make([]string, len(keys))
	for i, key := range keys {
		providers[i], ids[i] = key.Provider, key.EventID
	}
	return []any{providers, ids}
}

// rowScanner is a result's rows, pgx's or database/sql's.
type rowScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// read records which of keys rows (pgLookupSQL's) found, and marks the
// others absent.
func (p *pgBatch) read(rows rowScanner, keys []ReceiptKey) error {
	for rows.Next() {
		var key receiptKey
		var s storedReceipt
		if err := rows.Scan(&key.provider, &key.eventID, &s.sha, &s.status); err != nil {
			return err
		}
		p.known[key] = s
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, key := range keys {
		if rk := (receiptKey{key.Provider, key.EventID}); !hasKey(p.known, rk) {
			p.absent[rk] = true
		}
	}
	return nil
}

// lookup says whether the receipt k exists (or this batch inserts it). The
// keys Expect announced are read as the batch begins; any other is read
// alone.
func (p *pgBatch) lookup(ctx context.Context, k receiptKey) (storedReceipt, bool, error) {
	if err := p.begin(ctx); err != nil {
		return storedReceipt{}, false, err
	}
	if s, ok := p.known[k]; ok {
		return s, true, nil
	}
	if !p.absent[k] {
		keys := []ReceiptKey{{k.provider, k.eventID}}
		rows, err := p.conn.QueryContext(ctx, pgLookupSQL, keyArrays(keys)...)
		if err != nil {
			return storedReceipt{}, false, err
		}
		defer rows.Close()
		if err := p.read(rows, keys); err != nil {
			return storedReceipt{}, false, err
		}
	}
	s, ok := p.known[k]
	return s, ok, nil
}

func hasKey(m map[receiptKey]storedReceipt, k receiptKey) bool {
	_, ok := m[k]
	return ok
}

// pgReceipt is a held-back InsertReceipt: the receipt and the attempt that
// inserted it.
type pgReceipt struct {
	Receipt
	first Attempt
}

// insertReceipt holds r back if no receipt has its key; inserted says so.
func (p *pgBatch) insertReceipt(ctx context.Context, r Receipt, first Attempt) (inserted bool, err error) {
	k := receiptKey{r.Provider, r.EventID}
	if _, exists, err := p.lookup(ctx, k); err != nil || exists {
		return false, err
	}
	p.known[k] = storedReceipt{sha: r.BodySHA256, status: r.Status}
	delete(p.absent, k)
	p.added = append(p.added, k)
	p.receipts = append(p.receipts, pgReceipt{r, first})
	return true, nil
}

// holding reports whether the batch holds writes back.
func (p *pgBatch) holding() bool {
	return len(p.receipts)+len(p.attempts)+len(p.rows)+len(p.outbox) > 0 || p.head != nil
}

// pending is what the batch holds back as one statement, one
// data-modifying WITH clause per table that has rows (the receipts each with
// its first attempt, the redeliveries' attempts, the usage rows, the outbox
// rows), and the head's update if SaveHead held one back: each round trip is
// paid while every other receiver waits for the head's lock. The clauses run
// as one statement, so the attempts' and the outbox's foreign keys (checked
// at the statement's end) see the receipts beside them. query is empty if
// nothing is held back.
func (p *pgBatch) pending() (query string, args []any) {
	var w pgWith
	p.withReceipts(&w)
	p.withAttempts(&w)
	p.withRows(&w)
	p.withOutbox(&w)
	if h := p.head; h != nil {
		w.add("h", `UPDATE chain_head SET ledger_id = ?, ledger_hash = ?, receipt_id = ?, receipt_hash = ? WHERE id = 1`,
			h.LedgerID, h.LedgerHash, h.ReceiptID, h.ReceiptHash)
	}
	p.receipts, p.attempts, p.rows, p.outbox, p.head = p.receipts[:0], p.attempts[:0], p.rows[:0], p.outbox[:0], nil
	if len(w.clauses) == 0 {
		return "", nil
	}
	return "WITH " + strings.Join(w.clauses, ", ") + " SELECT 1", w.args
}

const heldBackWrites = "insert the batch's receipts, attempts, ledger rows and outbox messages"

// flush sends what the batch holds back (pending) before another statement
// of the batch; a failure stays in the batch, which then does not commit.
func (p *pgBatch) flush(ctx context.Context) error {
	if p.err != nil {
		return p.err
	}
	if query, args := p.pending(); query != "" {
		if _, err := p.conn.ExecContext(ctx, query, args...); err != nil {
			p.err = fmt.Errorf("%w: %s: %w", ErrHeldBack, heldBackWrites, err)
		}
	}
	return p.err
}

// pgWith collects a flush's WITH clauses and their arguments, in order.
type pgWith struct {
	clauses []string
	args    []any
}

func (w *pgWith) add(name, statement string, args ...any) {
	w.clauses = append(w.clauses, name+" AS ("+statement+")")
	w.args = append(w.args, args...)
}

// outboxRow is a held-back InsertOutbox.
type outboxRow struct {
	receiptID            int64
	destination, message string
	now                  int64
}

func (p *pgBatch) withOutbox(w *pgWith) {
	n := len(p.outbox)
	if n == 0 {
		return
	}
	receipts, nows := make([]int64, n), make([]int64, n)
	destinations, messages := make([]string, n), make([]string, n)
	for i, o := range p.outbox {
		receipts[i], destinations[i], messages[i], nows[i] = o.receiptID, o.destination, o.message, o.now
	}
	w.add("o", `INSERT INTO outbox (receipt_id, destination, message_id, status, created_at, pending_since, next_attempt_at)
		SELECT r, d, m, 'pending', t, t, t FROM unnest(?::bigint[], ?::text[], ?::text[], ?::bigint[]) WITH ORDINALITY AS o (r, d, m, t, n)
		ORDER BY n`, receipts, destinations, messages, nows)
}

func (p *pgBatch) withReceipts(w *pgWith) {
	n := len(p.receipts)
	if n == 0 {
		return
	}
	var (
		ids, received, processed                                           = make([]int64, n), make([]int64, n), make([]int64, n)
		providers, eventIDs, types, headers, statuses, errs, versions, src = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		bodies, sums, prev, hashes                                         = make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
		addrs, agents, requests                                            = make([]string, n), make([]string, n), make([]string, n)
		ages                                                               = make([]*int64, n)
		codes                                                              = make([]int64, n)
	)
	for i, r := range p.receipts {
		ids[i], providers[i], eventIDs[i], types[i], bodies[i], sums[i] = r.ID, r.Provider, r.EventID, r.EventType, r.Body, r.BodySHA256
		headers[i], statuses[i], errs[i], versions[i], src[i] = r.SignatureHeaders, r.Status, r.Error, r.HandlerVersion, r.Source
		received[i], processed[i], prev[i], hashes[i] = r.ReceivedAt, r.ProcessedAt, r.PrevHash, r.RowHash
		addrs[i], agents[i], requests[i], ages[i], codes[i] = r.first.RemoteAddr, r.first.UserAgent, r.first.RequestID, r.first.SignatureAgeMS, int64(r.first.StatusCode)
	}
	w.add("r", `INSERT INTO receipts
		(id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error, handler_version, source, received_at, processed_at,
		 prev_hash, row_hash, remote_addr, user_agent, request_id, signature_age_ms, status_code)
		SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[], ?::text[], ?::bytea[], ?::bytea[], ?::text[], ?::text[], ?::text[], ?::text[],
			?::text[], ?::bigint[], ?::bigint[], ?::bytea[], ?::bytea[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[])`,
		ids, providers, eventIDs, types, bodies, sums, headers, statuses, errs, versions, src, received, processed, prev, hashes,
		addrs, agents, requests, ages, codes)
}

func (p *pgBatch) withAttempts(w *pgWith) {
	n := len(p.attempts)
	if n == 0 {
		return
	}
	var (
		received, codes                                                 = make([]int64, n), make([]int64, n)
		ages                                                            = make([]*int64, n)
		providers, eventIDs, addrs, agents, requests, headers, outcomes = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		sums                                                            = make([][]byte, n)
	)
	for i, a := range p.attempts {
		providers[i], eventIDs[i], received[i], addrs[i], agents[i], requests[i] = a.Provider, a.EventID, a.ReceivedAt, a.RemoteAddr, a.UserAgent, a.RequestID
		sums[i], headers[i], ages[i], outcomes[i], codes[i] = a.BodySHA256, a.SignatureHeaders, a.SignatureAgeMS, a.Outcome, int64(a.StatusCode)
	}
	w.add("a", `INSERT INTO delivery_attempts
		(provider, event_id, received_at, remote_addr, user_agent, request_id, body_sha256, signature_headers, signature_age_ms, outcome, status_code)
		SELECT provider, event_id, received_at, remote_addr, user_agent, request_id, body_sha256, signature_headers, signature_age_ms, outcome, status_code
		FROM unnest(?::text[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[], ?::bytea[], ?::text[], ?::bigint[], ?::text[], ?::bigint[])
			WITH ORDINALITY AS a (provider, event_id, received_at, remote_addr, user_agent, request_id, body_sha256, signature_headers,
				signature_age_ms, outcome, status_code, n)
		ORDER BY n`, // in arrival order, as their ids
		providers, eventIDs, received, addrs, agents, requests, sums, headers, ages, outcomes, codes)
}

func (p *pgBatch) withRows(w *pgWith) {
	n := len(p.rows)
	if n == 0 {
		return
	}
	var (
		ids, quantities, decimals, occurred, recorded                       = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		kinds, providers, eventIDs, customers, meters, props, reasons, refs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		prev, hashes                                                        = make([][]byte, n), make([][]byte, n)
		receiptIDs                                                          = make([]int64, n)
	)
	for i, r := range p.rows {
		ids[i], kinds[i], providers[i], eventIDs[i], customers[i], meters[i] = r.ID, r.Kind, r.Provider, r.EventID, r.Customer, r.Meter
		quantities[i], decimals[i], props[i], reasons[i], refs[i], occurred[i], recorded[i] = r.Quantity, r.Decimals, r.Properties, r.Reason, r.Ref, r.OccurredAt, r.RecordedAt
		prev[i], hashes[i], receiptIDs[i] = r.PrevHash, r.RowHash, r.ReceiptID
	}
	w.add("u", `INSERT INTO metered_usage
		(id, kind, provider, event_id, customer_id, meter, quantity, decimals, properties, reason, ref, occurred_at, recorded_at, prev_hash, row_hash, receipt_id)
		SELECT id, kind, provider, event_id, customer_id, meter, quantity, decimals, properties, reason, ref, occurred_at, recorded_at, prev_hash, row_hash,
			NULLIF(receipt_id, 0)
		FROM unnest(?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::smallint[], ?::text[], ?::text[], ?::text[],
			?::bigint[], ?::bigint[], ?::bytea[], ?::bytea[], ?::bigint[])
			AS u (id, kind, provider, event_id, customer_id, meter, quantity, decimals, properties, reason, ref, occurred_at, recorded_at, prev_hash, row_hash,
				receipt_id)`,
		ids, kinds, providers, eventIDs, customers, meters, quantities, decimals, props, reasons, refs, occurred, recorded, prev, hashes, receiptIDs)
}
