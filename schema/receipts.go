package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Receipt is a stored receipt: an authenticated event as custody holds it.
type Receipt struct {
	ID             int64  `db:"id"`
	Provider       string `db:"provider"`
	EventID        string `db:"event_id"`
	EventType      string `db:"event_type"`
	Status         string `db:"status"`
	Error          string `db:"error"`
	Source         string `db:"source"`
	HandlerVersion string `db:"handler_version"`
	ReceivedAt     int64  `db:"received_at"`
	ProcessedAt    int64  `db:"processed_at"`
	// Body is nil when retention pruned it (Pruned), and possibly when it was
	// empty: an empty body is not a pruned one.
	Body             []byte `db:"body"`
	Pruned           bool   `db:"pruned"`
	BodySHA256       []byte `db:"body_sha256"`
	SignatureHeaders string `db:"signature_headers"`
	// PrevHash and RowHash are the receipt's link in the receipts chain
	// (custody computes them; InsertReceipt stores them).
	PrevHash []byte `db:"prev_hash"`
	RowHash  []byte `db:"row_hash"`
	// FirstStatus is the status the receipt was stored with, before any
	// replay: what its chain link covers (EventReceipts reads it; empty
	// elsewhere).
	FirstStatus string `db:"first_status"`
}

// The hot path's receipt statements (the writer prepares them, stmtCache). ON
// CONFLICT DO NOTHING changes no row when (provider, event_id) exists: the
// unique constraint, inside the batch's transaction, tells a new event from
// a duplicate (PostgreSQL reads the same statement alike). A new receipt
// carries the attempt that inserted it (migration 0009): its own fields
// are the last five columns.
const (
	insertReceiptSQL = `INSERT INTO receipts
	(id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error, handler_version, source, received_at, processed_at,
	 prev_hash, row_hash, remote_addr, user_agent, request_id, signature_age_ms, status_code)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (provider, event_id) DO NOTHING`
	storedReceiptSQL = `SELECT body_sha256, status FROM receipts WHERE provider = ? AND event_id = ?`
)

// keyConflict is the ON CONFLICT target of a (provider, event_id) key as
// schema's SQL writes it; pgKeyConflict is the same target on PostgreSQL,
// whose unique indexes hold a digest of the event id (migration 0013: an id
// of any length fits), and a conflict target must name the index's
// expression. forBackend puts the one in place of the other.
const (
	keyConflict   = `ON CONFLICT (provider, event_id)`
	pgKeyConflict = `ON CONFLICT (provider, hookledger_key(event_id))`
)

// eventIs and eventIn match, in a statement whose placeholders are
// numbered, a test of one table's event id against one parameter or a list
// of them: "r.event_id = $2", "event_id IN ($2, $3)".
var (
	eventIs = regexp.MustCompile(`\b((?:\w+\.)?event_id) = (\$\d+)`)
	eventIn = regexp.MustCompile(`\b((?:\w+\.)?event_id) IN \((\$\d+(?:, \$\d+)*)\)`)
)

// byEventKey is query, a lookup of receipts by provider and event id, as
// the backend of q runs it. On PostgreSQL each test of the event id also
// tests its digest, so the receipts' unique btree on (provider,
// hookledger_key(event_id)) serves the lookup: it is the one index over
// receipts that holds the event id (migration 0025 dropped the hash index
// on the raw column, which took every new random id on a page of its own
// too). The raw comparison stays, so a lookup means exactly what it says on
// SQLite. The placeholders are numbered here (the connection's rebind
// leaves numbered ones alone), so a parameter is named twice and bound
// once: the arguments do not change. A test of another table's event id
// (delivery attempts' in the same statement) keeps its raw comparison, which
// that table's hash index on event_id serves: the digest only filters there.
func byEventKey(q any, query string) string {
	if !onPostgres(q) {
		return query
	}
	query = sqlx.Rebind(sqlx.DOLLAR, query)
	query = eventIs.ReplaceAllString(query, "hookledger_key(${1}) = hookledger_key(${2}) AND ${1} = ${2}")
	return eventIn.ReplaceAllStringFunc(query, func(m string) string {
		sub := eventIn.FindStringSubmatch(m)
		params := strings.Split(sub[2], ", ")
		for i, p := range params {
			params[i] = "hookledger_key(" + p + ")"
		}
		return "hookledger_key(" + sub[1] + ") IN (" + strings.Join(params, ", ") + ") AND " + m
	})
}

// customerIs matches, in a statement whose placeholders are numbered, a
// test of the customer id against one parameter: "customer_id = $1".
var customerIs = regexp.MustCompile(`\b((?:\w+\.)?customer_id) = (\$\d+)`)

// byCustomerKey is query, a read of ledger rows by customer, as the backend
// of q runs it: on PostgreSQL the customer's test also tests its digest, so
// the btree on (hookledger_key(customer_id), id) serves it (migration 0020;
// 0025 dropped the hash index on customer_id, whose insert walked the
// customer's whole bucket chain, a page per ~400 rows the customer has, for
// every new row). The raw comparison stays, as in byEventKey. SQLite's
// index hint (customerTimeIndex) is dropped.
func byCustomerKey(q any, query string) string {
	if !onPostgres(q) {
		return query
	}
	query = sqlx.Rebind(sqlx.DOLLAR, strings.Replace(query, customerTimeIndex, "", 1))
	return customerIs.ReplaceAllString(query, "hookledger_key(${1}) = hookledger_key(${2}) AND ${1} = ${2}")
}

// forBackend is query as the backend of q (a handle or transaction) runs
// it.
func forBackend(q any, query string) string {
	if onPostgres(q) {
		return strings.Replace(query, keyConflict, pgKeyConflict, 1)
	}
	return query
}

// InsertReceipt stores r, with first as the delivery attempt that inserted
// it, unless provider and event id already have a receipt: inserted says
// which. A duplicate stores nothing here: its attempt is the caller's
// InsertAttempt. Of first only its own fields are stored (remote address,
// user agent, request id, signature age, status code): its time, body
// digest and signature headers are r's, its outcome inserted. Pruned is
// ignored. r and first are passed by value: the writer calls this once per
// delivery, and values keep them off the heap.
func (b Batch) InsertReceipt(ctx context.Context, r Receipt, first Attempt) (inserted bool, err error) {
	if b.pg != nil {
		return b.pg.insertReceipt(ctx, r, first)
	}
	res, err := b.tx.ExecContext(ctx, insertReceiptSQL, r.ID, r.Provider, r.EventID, r.EventType, r.Body, r.BodySHA256,
		r.SignatureHeaders, r.Status, r.Error, r.HandlerVersion, r.Source, r.ReceivedAt, r.ProcessedAt, r.PrevHash, r.RowHash,
		first.RemoteAddr, first.UserAgent, first.RequestID, signatureAge(first.SignatureAgeMS), first.StatusCode)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// StoredReceipt reads the body hash and status of the receipt an insert
// found already there (ErrNotFound: none).
func (b Batch) StoredReceipt(ctx context.Context, provider, eventID string) (bodySHA256 []byte, status string, err error) {
	if b.pg != nil {
		s, ok, err := b.pg.lookup(ctx, receiptKey{provider, eventID})
		if err == nil && !ok {
			err = ErrNotFound
		}
		return s.sha, s.status, err
	}
	err = b.tx.QueryRowContext(ctx, storedReceiptSQL, provider, eventID).Scan(&bodySHA256, &status)
	return bodySHA256, status, notFound(err)
}

// GetReceipt reads provider's receipt for eventID inside the batch, without
// its signature headers and chain link (ErrNotFound: none). A replay decides
// on it, so the decision and the writes that follow commit together.
func (b Batch) GetReceipt(ctx context.Context, provider, eventID string) (Receipt, error) {
	var r Receipt
	err := b.tx.QueryRowContext(ctx, byEventKey(b.tx, `SELECT id, provider, event_id, event_type, status, error, source, handler_version,
		received_at, processed_at, body, body IS NULL, body_sha256 FROM receipts WHERE provider = ? AND event_id = ?`), provider, eventID).
		Scan(&r.ID, &r.Provider, &r.EventID, &r.EventType, &r.Status, &r.Error, &r.Source, &r.HandlerVersion,
			&r.ReceivedAt, &r.ProcessedAt, &r.Body, &r.Pruned, &r.BodySHA256)
	if errors.Is(err, sql.ErrNoRows) {
		return Receipt{}, ErrNotFound
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("read receipt %s/%s: %w", provider, eventID, err)
	}
	return r, nil
}

// UpdateReceiptStatus stores r's Status, Error, HandlerVersion and
// ProcessedAt on the receipt of r.Provider and r.EventID: what applying it
// again (a replay) did. Nothing else about a receipt ever changes.
func (b Batch) UpdateReceiptStatus(ctx context.Context, r Receipt) error {
	_, err := b.tx.ExecContext(ctx, byEventKey(b.tx, `UPDATE receipts SET status = ?, error = ?, handler_version = ?, processed_at = ?
		WHERE provider = ? AND event_id = ?`), r.Status, r.Error, r.HandlerVersion, r.ProcessedAt, r.Provider, r.EventID)
	return err
}

// CountReceipts counts every receipt (a b-tree page walk, no row decoded).
func (db *DB) CountReceipts(ctx context.Context) (int64, error) {
	var n int64
	err := db.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM receipts`)
	return n, err
}

// maxEventIDs bounds the event ids bound in one query, well under SQLite's
// variable limit.
const maxEventIDs = 500

// eventIDChunks calls fn with provider's ids maxEventIDs at a time, as the
// arguments and the IN list of provider = ? AND event_id IN (…).
func eventIDChunks(provider string, ids []string, fn func(in string, args []any) error) error {
	for len(ids) > 0 {
		n := min(maxEventIDs, len(ids))
		args := make([]any, 0, n+1)
		args = append(args, provider)
		for _, id := range ids[:n] {
			args = append(args, id)
		}
		if err := fn(`provider = ? AND event_id IN (?`+strings.Repeat(", ?", n-1)+`)`, args); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// prunedByRetention is true for a receipt whose body retention.payload
// cleared: a prune clears the body and the signature headers together, and
// only of receipts received before the mark it leaves in the chain head
// (migration 0010). A body gone any other way is not pruned.
const prunedByRetention = `(body IS NULL AND signature_headers = '' AND
	received_at < (SELECT payload_pruned_before FROM chain_head WHERE id = 1))`

// EventReceipts reads the receipts of provider's events eventIDs that exist,
// with their chain links, in no particular order; the (provider,
// event_id) index answers it (on PostgreSQL its digest's, byEventKey). Pruned is prunedByRetention here: a body
// missing without it has Body nil and Pruned false. On a database from
// before the receipts chain (a read-only open of an older one) the links are
// empty.
func (tx *ReadTx) EventReceipts(ctx context.Context, provider string, eventIDs []string) ([]Receipt, error) {
	var out []Receipt
	err := eventIDChunks(provider, eventIDs, func(in string, args []any) error {
		var rs []Receipt
		columns := func(pruned string) string {
			return `SELECT provider, event_id, event_type, status, error, source, handler_version,
			received_at, processed_at, body, ` + pruned + ` AS pruned, body_sha256, signature_headers`
		}
		// The status as first stored, as scanReceiptLinks reads it.
		const links = `, id, prev_hash, row_hash,
			COALESCE((SELECT p.from_status FROM replays p WHERE p.provider = r.provider AND p.event_id = r.event_id ORDER BY p.id LIMIT 1), r.status)
			AS first_status FROM receipts r WHERE `
		err := sqlx.SelectContext(ctx, tx.tx, &rs, byEventKey(tx.tx, columns(prunedByRetention)+links+in), args...)
		if err != nil && predates(ctx, tx.tx, versionPayloadPruned) {
			// Older databases do not record how far bodies were pruned:
			// every missing body counts as pruned, as it did then.
			err = sqlx.SelectContext(ctx, tx.tx, &rs, columns("body IS NULL")+links+in, args...)
			if err != nil && predates(ctx, tx.tx, versionChained) {
				err = sqlx.SelectContext(ctx, tx.tx, &rs, columns("body IS NULL")+` FROM receipts WHERE `+in, args...)
			}
		}
		if err != nil {
			return err
		}
		out = append(out, rs...)
		return nil
	})
	return out, err
}

// HasReceipt reports whether provider holds a receipt for eventID.
func (db *DB) HasReceipt(ctx context.Context, provider, eventID string) (bool, error) {
	var n int
	// The (provider, event_id) index answers it (on PostgreSQL its digest's, byEventKey).
	err := db.Read.QueryRowxContext(ctx, byEventKey(db.Read, `SELECT COUNT(*) FROM receipts WHERE provider = ? AND event_id = ?`),
		provider, eventID).Scan(&n)
	return n > 0, err
}

// ReceiptsPresent returns which of provider's eventIDs have a receipt.
func (db *DB) ReceiptsPresent(ctx context.Context, provider string, eventIDs []string) ([]string, error) {
	return present(ctx, db.Read, `SELECT event_id FROM receipts WHERE provider = ? AND event_id IN (?)`, provider, eventIDs, 1)
}

// present runs query, of the form SELECT event_id FROM t WHERE provider = ?
// AND event_id IN (?), for provider and eventIDs. A database older than
// migration version has no table t, and so none of the ids. t has a unique
// index on (provider, event_id) (PostgreSQL: on the id's digest, which
// byEventKey makes the lookup use).
func present(ctx context.Context, q sqlx.QueryerContext, query, provider string, eventIDs []string, version int) ([]string, error) {
	query, args, err := sqlx.In(query, provider, eventIDs)
	if err != nil {
		return nil, err
	}
	var found []string
	if err := sqlx.SelectContext(ctx, q, &found, byEventKey(q, query), args...); err != nil {
		if predates(ctx, q, version) {
			return nil, nil
		}
		return nil, err
	}
	return found, nil
}
