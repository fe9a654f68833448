package schema

import (
	"context"
	"regexp"

	"github.com/jmoiron/sqlx"
)

// The reads behind `hookledger verify` that are not the ledger's own rows:
// SQLite's integrity check and the custody checks over receipts and replays.

// IntegrityCheck runs PRAGMA integrity_check: ["ok"] when the file is sound.
// On PostgreSQL it runs amcheck's checks instead (postgresIntegrityCheck).
func (db *DB) IntegrityCheck(ctx context.Context) ([]string, error) {
	if db.Postgres() {
		return postgresIntegrityCheck(ctx, db.Read)
	}
	var msgs []string
	err := sqlx.SelectContext(ctx, db.Read, &msgs, `PRAGMA integrity_check`)
	return msgs, err
}

// EventKey names one event's receipt (or ledger row) by id.
type EventKey struct {
	ID       int64  `db:"id"`
	Provider string `db:"provider"`
	EventID  string `db:"event_id"`
}

// CountAppliedReceipts counts the receipts with status applied and an id
// above afterID (0: every one).
func (db *DB) CountAppliedReceipts(ctx context.Context, afterID int64) (int64, error) {
	var n int64
	err := db.Read.QueryRowxContext(ctx, `SELECT COUNT(*) FROM receipts r WHERE `+appliedAfter(db.Read, afterID), afterID).Scan(&n)
	return n, err
}

// appliedAfter is the condition "receipt r is applied, its id above the
// argument". Every receipt (afterID 0) is counted fastest in receipts_status
// alone; from an id on, SQLite would still pick that index and read every
// applied receipt in it, so its status is kept out of the index choice
// (unary +) and it walks the ids from the bound. PostgreSQL plans by its
// statistics (and has no unary + for text).
func appliedAfter(q any, afterID int64) string {
	if afterID > 0 && !onPostgres(q) {
		return `+r.status = 'applied' AND r.id > ?`
	}
	return `r.status = 'applied' AND r.id > ?`
}

// AppliedWithoutUsage lists up to limit applied receipts above afterID
// (0: every one) with no usage row, in id order. A receipt's rows are those that name it (receipt_id,
// migration 0015); a row that names a receipt of another event is
// UsageWithoutApplied's.
func (db *DB) AppliedWithoutUsage(ctx context.Context, afterID int64, limit int) ([]EventKey, error) {
	var out []EventKey
	err := sqlx.SelectContext(ctx, db.Read, &out, `SELECT r.id, r.provider, r.event_id FROM receipts r
		WHERE `+appliedAfter(db.Read, afterID)+` AND NOT EXISTS (SELECT 1 FROM metered_usage u WHERE u.receipt_id = r.id AND u.kind = 'usage')
		ORDER BY r.id LIMIT ?`, afterID, limit)
	return out, err
}

// UsageWithoutApplied lists up to limit usage rows above afterID (0: every
// one) without an applied receipt, in id order: a row's receipt is the one its receipt_id names
// (migration 0015), and it must be of the row's provider and event id, so a
// receipt_id changed to another receipt's is listed too. Retention
// (retention.keys) deletes old receipts on purpose, and each such prune
// records the ledger head it left behind: a row at or below it may lack its
// receipt entirely (one deleted by retention: at or below
// receipts_pruned_through; or, for a row 0015 found without a receipt, none
// of its event id at all), and is not listed. A row above it, or one whose
// receipt exists but is not applied, is.
func (db *DB) UsageWithoutApplied(ctx context.Context, afterID int64, limit int) ([]EventKey, error) {
	var out []EventKey
	err := sqlx.SelectContext(ctx, db.Read, &out, keyJoins(db.Read, `SELECT u.id, u.provider, u.event_id FROM metered_usage u
		WHERE u.id > ? AND u.kind = 'usage' AND NOT EXISTS (
			SELECT 1 FROM receipts r WHERE r.id = u.receipt_id AND r.provider = u.provider AND r.event_id = u.event_id AND r.status = 'applied')
		AND NOT (u.id <= (SELECT COALESCE(MAX(ledger_head_id), 0) FROM prune_runs WHERE keys_deleted > 0) AND (
			u.receipt_id <= (SELECT receipts_pruned_through FROM chain_head WHERE id = 1)
				AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.id = u.receipt_id)
			OR u.receipt_id IS NULL AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.provider = u.provider AND r.event_id = u.event_id)))
		ORDER BY u.id LIMIT ?`), afterID, limit)
	return out, err
}

// StoredBody is a receipt's body as stored, with the digest taken when it arrived.
type StoredBody struct {
	EventKey
	Body       []byte `db:"body"`
	BodySHA256 []byte `db:"body_sha256"`
}

// ScanStoredBodies calls fn with every receipt above afterID (0: every
// one) that still has its body and every one whose body is gone without a prune of retention.payload
// (prunedByRetention): its Body is nil. A pruned one is left out. In id
// order; the value is reused between calls.
func (db *DB) ScanStoredBodies(ctx context.Context, afterID int64, fn func(*StoredBody) error) error {
	const query = `SELECT id, provider, event_id, body, body_sha256 FROM receipts WHERE id > ? AND `
	rows, err := db.Read.QueryContext(ctx, query+`(body IS NOT NULL OR NOT `+prunedByRetention+`) ORDER BY id`, afterID)
	if err != nil && predates(ctx, db.Read, versionPayloadPruned) {
		rows, err = db.Read.QueryContext(ctx, query+`body IS NOT NULL ORDER BY id`, afterID)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	var b StoredBody
	for rows.Next() {
		if err := rows.Scan(&b.ID, &b.Provider, &b.EventID, &b.Body, &b.BodySHA256); err != nil {
			return err
		}
		if err := fn(&b); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ReplayStep is one replay of a receipt, with the receipt's status now.
type ReplayStep struct {
	EventKey          // the receipt
	Status     string // the receipt's current status
	ReplayID   int64
	FromStatus string
	ToStatus   string
}

// ScanReplaySteps calls fn with every replay joined to its receipt, in
// receipt and replay order. The value is reused between calls. Replays are
// few: CROSS JOIN makes SQLite read them and look each receipt up, where it
// would otherwise walk every receipt (in id order, for the ORDER BY) and
// look its replays up, a read of the whole receipts table however few
// replays there are (PostgreSQL plans the join by its statistics).
func (db *DB) ScanReplaySteps(ctx context.Context, fn func(*ReplayStep) error) error {
	rows, err := db.Read.QueryContext(ctx, keyJoins(db.Read, `SELECT r.id, r.provider, r.event_id, r.status, p.id, p.from_status, p.to_status
		FROM replays p CROSS JOIN receipts r WHERE r.provider = p.provider AND r.event_id = p.event_id ORDER BY r.id, p.id`))
	if err != nil {
		return err
	}
	defer rows.Close()
	var s ReplayStep
	for rows.Next() {
		if err := rows.Scan(&s.ID, &s.Provider, &s.EventID, &s.Status, &s.ReplayID, &s.FromStatus, &s.ToStatus); err != nil {
			return err
		}
		if err := fn(&s); err != nil {
			return err
		}
	}
	return rows.Err()
}

// eventJoin matches a join of two tables' event ids, "u.event_id = r.event_id".
var eventJoin = regexp.MustCompile(`\b(\w+)\.event_id = (\w+)\.event_id\b`)

// keyJoins adds, on PostgreSQL, the digest of the event id to every join on
// it, so the unique btree indexes on (provider, hookledger_key(event_id))
// (migration 0013) serve the join whatever the planner believes of the
// tables' sizes: with statistics from before a bulk load it would otherwise
// pick a nested loop over a sequential scan, quadratic in the rows.
func keyJoins(q any, query string) string {
	if !onPostgres(q) {
		return query
	}
	return eventJoin.ReplaceAllString(query, "hookledger_key($1.event_id) = hookledger_key($2.event_id) AND $1.event_id = $2.event_id")
}
