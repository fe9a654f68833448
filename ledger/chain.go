package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Row kinds in metered_usage.
const (
	KindUsage      = "usage"
	KindAdjustment = "adjustment"
)

// Row is one append-only ledger row.
type Row struct {
	ID         int64    `db:"id" json:"id"`
	Kind       string   `db:"kind" json:"kind"`
	Provider   string   `db:"provider" json:"provider"`
	EventID    string   `db:"event_id" json:"event_id"`
	Customer   string   `db:"customer_id" json:"customer"`
	Meter      string   `db:"meter" json:"meter"`
	Quantity   Quantity `db:"quantity" json:"quantity"`
	Properties string   `db:"properties" json:"properties"`
	Reason     string   `db:"reason" json:"reason,omitempty"`
	Ref        string   `db:"ref" json:"ref,omitempty"`
	OccurredAt int64    `db:"occurred_at" json:"occurred_at_ms"`
	RecordedAt int64    `db:"recorded_at" json:"recorded_at_ms"`
	PrevHash   []byte   `db:"prev_hash" json:"-"`
	RowHash    []byte   `db:"row_hash" json:"-"`
}

// Hash returns SHA-256 over prev and the row's canonical encoding: every field
// but the hashes, each length-prefixed (canon) so no two rows encode alike.
func (r *Row) Hash(prev []byte) []byte {
	c := newCanon()
	c.h.Write(prev)
	c.int(r.ID)
	c.str(r.Kind)
	c.str(r.Provider)
	c.str(r.EventID)
	c.str(r.Customer)
	c.str(r.Meter)
	c.int(int64(r.Quantity))
	c.str(r.Properties)
	c.str(r.Reason)
	c.str(r.Ref)
	c.int(r.OccurredAt)
	c.int(r.RecordedAt)
	return c.sum()
}

// GenesisHash is the prev_hash of the first row of either chain (ledger rows
// and receipts).
var GenesisHash = make([]byte, sha256.Size)

// Chain is the head of one hash chain inside one write transaction. It is
// loaded (LoadHead) after BEGIN IMMEDIATE, so no other writer can move the head
// meanwhile.
type Chain struct {
	LastID   int64
	LastHash []byte
}

// LoadChain reads the head of the ledger chain.
func LoadChain(ctx context.Context, q sqlx.QueryerContext) (Chain, error) {
	h, err := LoadHead(ctx, q)
	return h.Ledger, err
}

// InsertRowSQL appends one ledger row; the chain assigns id and hashes.
const InsertRowSQL = `INSERT INTO metered_usage
	(id, kind, provider, event_id, customer_id, meter, quantity, properties, reason, ref, occurred_at, recorded_at, prev_hash, row_hash)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// Append links r to the chain and inserts it with stmt (prepared from
// InsertRowSQL). On error the chain is unchanged.
func (c *Chain) Append(ctx context.Context, stmt *sqlx.Stmt, r *Row) error {
	r.ID = c.LastID + 1
	r.PrevHash = c.LastHash
	r.RowHash = r.Hash(r.PrevHash)
	_, err := stmt.ExecContext(ctx, r.ID, r.Kind, r.Provider, r.EventID, r.Customer, r.Meter, int64(r.Quantity),
		r.Properties, r.Reason, r.Ref, r.OccurredAt, r.RecordedAt, r.PrevHash, r.RowHash)
	if err != nil {
		return fmt.Errorf("insert usage row for %s/%s meter %s: %w", r.Provider, r.EventID, r.Meter, err)
	}
	c.LastID, c.LastHash = r.ID, r.RowHash
	return nil
}

// ReceiptLink is what the receipts chain commits to for one receipt: the
// custody facts that never change once it is stored. A receipt's status,
// error, handler version and processed_at change when it is replayed, and
// retention deletes its body and signature headers, so they stay out of the
// hash: Status here is the status the receipt was stored with (verify follows
// the replays table from it to the current status), and the body is checked
// against BodySHA256, which the hash does cover.
type ReceiptLink struct {
	ID         int64
	Provider   string
	EventID    string
	EventType  string
	BodySHA256 []byte
	Status     string // as first stored
	Source     string
	ReceivedAt int64
	PrevHash   []byte
	RowHash    []byte
}

// Hash returns SHA-256 over prev and the link's fields, length-prefixed like
// Row.Hash (canon's encoding); the leading tag keeps a receipt's encoding from
// ever equalling a ledger row's. It runs for every delivery on the writer's
// hot path, so it encodes into one stack buffer instead of through canon's
// per-field writes.
func (l *ReceiptLink) Hash(prev []byte) []byte {
	str := func(b []byte, s string) []byte { return append(binary.BigEndian.AppendUint64(b, uint64(len(s))), s...) }
	b := make([]byte, 0, 512)
	b = str(b, "hookledger-receipt-v1")
	b = append(b, prev...)
	b = binary.BigEndian.AppendUint64(b, uint64(l.ID))
	b = str(b, l.Provider)
	b = str(b, l.EventID)
	b = str(b, l.EventType)
	b = append(binary.BigEndian.AppendUint64(b, uint64(len(l.BodySHA256))), l.BodySHA256...)
	b = str(b, l.Status)
	b = str(b, l.Source)
	b = binary.BigEndian.AppendUint64(b, uint64(l.ReceivedAt))
	sum := sha256.Sum256(b)
	return sum[:]
}

// Next links l as the receipt after the head: it sets l's id and hashes but
// leaves the chain where it is, because the insert may find the event already
// stored. Call Advance once the receipt is in.
func (c *Chain) Next(l *ReceiptLink) {
	l.ID = c.LastID + 1
	l.PrevHash = c.LastHash
	l.RowHash = l.Hash(l.PrevHash)
}

// Advance moves the head to l, which Next linked.
func (c *Chain) Advance(l *ReceiptLink) { c.LastID, c.LastHash = l.ID, l.RowHash }

// EachReceiptLink calls fn with every receipt's link in id order. The status
// as first stored is the from_status of the receipt's first replay, or its
// status if it was never replayed. The migration that chains existing
// receipts and verify both read links here, so they cannot disagree.
func EachReceiptLink(ctx context.Context, q sqlx.QueryerContext, fn func(*ReceiptLink) error) error {
	rows, err := q.QueryxContext(ctx, `SELECT r.id, r.provider, r.event_id, r.event_type, r.body_sha256,
		COALESCE((SELECT p.from_status FROM replays p WHERE p.provider = r.provider AND p.event_id = r.event_id ORDER BY p.id LIMIT 1), r.status),
		r.source, r.received_at, r.prev_hash, r.row_hash FROM receipts r ORDER BY r.id`)
	if err != nil {
		return fmt.Errorf("read receipts: %w", err)
	}
	defer rows.Close()
	var l ReceiptLink
	for rows.Next() {
		if err := rows.Scan(&l.ID, &l.Provider, &l.EventID, &l.EventType, &l.BodySHA256, &l.Status, &l.Source, &l.ReceivedAt,
			&l.PrevHash, &l.RowHash); err != nil {
			return fmt.Errorf("read receipts: %w", err)
		}
		if err := fn(&l); err != nil {
			return err
		}
	}
	return rows.Err()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
