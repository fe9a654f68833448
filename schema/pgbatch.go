package schema

import (
	"context"
	"database/sql"
	"fmt"
	"iter"
	"strings"

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
// the chain head's lock, which every batch takes first (Writer.Begin), and
// the unique key still decides: the held-back insert says ON
// CONFLICT DO NOTHING, and a batch whose insert stores fewer receipts than
// the read predicted fails (the writer then runs it again, one op at a time).
//
// Anything else the batch runs (a replay's read, a checkpoint, the head's
// update) first sends what is held back (batchTx), so every statement sees
// the batch's own writes in order.

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
	start    ChainHead                    // the head as Begin locked it
	expected []ReceiptKey                 // keys Expect announced, not read yet
	known    map[receiptKey]storedReceipt // receipts that exist, or that this batch inserts
	absent   map[receiptKey]bool          // keys read and found missing (and not inserted since)
	receipts []pgReceipt
	attempts []Attempt
	rows     []LedgerRow
	outbox   []outboxRow
	head     *ChainHead   // a held-back SaveHead
	added    []receiptKey // known keys this batch inserted since the savepoint (Isolated)
	err      error        // a failed flush; the batch must not commit
}

// batchTx is a batch's transaction. On PostgreSQL each statement through it
// first flushes what the batch holds back; on SQLite it is the transaction.
type batchTx struct {
	*sqlx.Tx
	pg *pgBatch
}

func (t batchTx) flush(ctx context.Context) error {
	if t.pg == nil {
		return nil
	}
	return t.pg.flush(ctx, t.Tx)
}

func (t batchTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

func (t batchTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.QueryContext(ctx, q, args...)
}

func (t batchTx) QueryxContext(ctx context.Context, q string, args ...any) (*sqlx.Rows, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.QueryxContext(ctx, q, args...)
}

// QueryRowContext and QueryRowxContext cannot return a flush's error: it
// stays in the batch (pgBatch.err), which then refuses to commit.
func (t batchTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	t.flush(ctx)
	return t.Tx.QueryRowContext(ctx, q, args...)
}

func (t batchTx) QueryRowxContext(ctx context.Context, q string, args ...any) *sqlx.Row {
	t.flush(ctx)
	return t.Tx.QueryRowxContext(ctx, q, args...)
}

func (t batchTx) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.PrepareContext(ctx, q)
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

// Flush sends what the batch holds back (PostgreSQL), so that its errors
// belong to the ops applied so far; the writer flushes before committing.
func (b Batch) Flush(ctx context.Context) error { return b.tx.flush(ctx) }

// lookup says whether the receipt k exists (or this batch inserts it),
// reading every expected key not read yet in one statement.
func (p *pgBatch) lookup(ctx context.Context, tx *sqlx.Tx, k receiptKey) (storedReceipt, bool, error) {
	if s, ok := p.known[k]; ok {
		return s, true, nil
	}
	if p.absent[k] {
		return storedReceipt{}, false, nil
	}
	keys := p.expected
	p.expected = nil
	if !containsKey(keys, k) {
		keys = append(keys, ReceiptKey{k.provider, k.eventID})
	}
	providers, ids := make([]string, len(keys)), make([]string, len(keys))
	for i, key := range keys {
		providers[i], ids[i] = key.Provider, key.EventID
	}
	// One probe of the unique index per key, whatever the table's size. As a
	// plain join the planner hashed the keys and read the whole table for
	// every batch until it held thousands of receipts, and for as long as a
	// prepared plan made while it was empty lasted (until autovacuum's first
	// ANALYZE, a minute or more): throughput fell with every receipt stored.
	// LIMIT keeps the lateral subquery from being flattened into that join.
	rows, err := tx.QueryContext(ctx, `SELECT k.provider, k.event_id, r.body_sha256, r.status
		FROM unnest(?::text[], ?::text[]) AS k (provider, event_id)
		CROSS JOIN LATERAL (SELECT body_sha256, status FROM receipts
			WHERE provider = k.provider AND event_id = k.event_id LIMIT 1) AS r`,
		providers, ids)
	if err != nil {
		return storedReceipt{}, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var key receiptKey
		var s storedReceipt
		if err := rows.Scan(&key.provider, &key.eventID, &s.sha, &s.status); err != nil {
			return storedReceipt{}, false, err
		}
		p.known[key] = s
	}
	if err := rows.Err(); err != nil {
		return storedReceipt{}, false, err
	}
	for _, key := range keys {
		if rk := (receiptKey{key.Provider, key.EventID}); !hasKey(p.known, rk) {
			p.absent[rk] = true
		}
	}
	s, ok := p.known[k]
	return s, ok, nil
}

func hasKey(m map[receiptKey]storedReceipt, k receiptKey) bool {
	_, ok := m[k]
	return ok
}

func containsKey(keys []ReceiptKey, k receiptKey) bool {
	for _, key := range keys {
		if key.Provider == k.provider && key.EventID == k.eventID {
			return true
		}
	}
	return false
}

// pgReceipt is a held-back InsertReceipt: the receipt and the attempt that
// inserted it.
type pgReceipt struct {
	Receipt
	first Attempt
}

// insertReceipt holds r back if no receipt has its key; inserted says so.
func (p *pgBatch) insertReceipt(ctx context.Context, tx *sqlx.Tx, r Receipt, first Attempt) (inserted bool, err error) {
	k := receiptKey{r.Provider, r.EventID}
	if _, exists, err := p.lookup(ctx, tx, k); err != nil || exists {
		return false, err
	}
	p.known[k] = storedReceipt{sha: r.BodySHA256, status: r.Status}
	delete(p.absent, k)
	p.added = append(p.added, k)
	p.receipts = append(p.receipts, pgReceipt{r, first})
	return true, nil
}

// flush sends what the batch holds back in one statement, one
// data-modifying WITH clause per table that has rows (the receipts each with
// its first attempt, the redeliveries' attempts, the usage rows, the outbox
// rows), and the head's update if SaveHead held one back: each round trip is
// paid while every other receiver waits for the head's lock. The clauses run
// as one statement, so the attempts' and the outbox's foreign keys (checked
// at the statement's end) see the receipts beside them.
func (p *pgBatch) flush(ctx context.Context, tx *sqlx.Tx) error {
	if p.err != nil {
		return p.err
	}
	var w pgWith
	p.withReceipts(&w)
	p.withAttempts(&w)
	p.withRows(&w)
	p.withOutbox(&w)
	if h := p.head; h != nil {
		w.add("h", `UPDATE chain_head SET ledger_id = ?, ledger_hash = ?, receipt_id = ?, receipt_hash = ? WHERE id = 1`,
			h.LedgerID, h.LedgerHash, h.ReceiptID, h.ReceiptHash)
	}
	if len(w.clauses) == 0 {
		return nil
	}
	count := "0"
	if len(p.receipts) > 0 {
		count = "(SELECT count(*) FROM r)"
	}
	var stored int64
	if err := tx.QueryRowContext(ctx, "WITH "+strings.Join(w.clauses, ", ")+" SELECT "+count, w.args...).Scan(&stored); err != nil {
		p.err = fmt.Errorf("insert the batch's receipts, attempts, ledger rows and outbox messages: %w", err)
		return p.err
	}
	if n := len(p.receipts); stored != int64(n) {
		// Cannot happen while every receipt insert takes the head's lock
		// first; if it does, the batch fails rather than chain a receipt
		// that is not there.
		p.err = fmt.Errorf("insert receipts: %d of %d stored: another writer inserted receipts without the chain head's lock", stored, n)
		return p.err
	}
	p.receipts, p.attempts, p.rows, p.outbox, p.head = p.receipts[:0], p.attempts[:0], p.rows[:0], p.outbox[:0], nil
	return nil
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
			?::text[], ?::bigint[], ?::bigint[], ?::bytea[], ?::bytea[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[])
		ON CONFLICT (provider, event_id) DO NOTHING RETURNING 1`,
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
		ids, quantities, occurred, recorded                                 = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		kinds, providers, eventIDs, customers, meters, props, reasons, refs = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		prev, hashes                                                        = make([][]byte, n), make([][]byte, n)
	)
	for i, r := range p.rows {
		ids[i], kinds[i], providers[i], eventIDs[i], customers[i], meters[i] = r.ID, r.Kind, r.Provider, r.EventID, r.Customer, r.Meter
		quantities[i], props[i], reasons[i], refs[i], occurred[i], recorded[i] = r.Quantity, r.Properties, r.Reason, r.Ref, r.OccurredAt, r.RecordedAt
		prev[i], hashes[i] = r.PrevHash, r.RowHash
	}
	w.add("u", `INSERT INTO metered_usage
		(id, kind, provider, event_id, customer_id, meter, quantity, properties, reason, ref, occurred_at, recorded_at, prev_hash, row_hash)
		SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[],
			?::bigint[], ?::bigint[], ?::bytea[], ?::bytea[])`,
		ids, kinds, providers, eventIDs, customers, meters, quantities, props, reasons, refs, occurred, recorded, prev, hashes)
}
