package ledger

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
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

// GenesisHash is the prev_hash of the first ledger row.
var GenesisHash = make([]byte, sha256.Size)

// Chain is the head of the hash chain inside one write transaction. It is
// loaded after BEGIN IMMEDIATE, so no other writer can move the head meanwhile.
type Chain struct {
	LastID   int64
	LastHash []byte
}

// LoadChain reads the current head of the chain.
func LoadChain(ctx context.Context, q sqlx.QueryerContext) (Chain, error) {
	c := Chain{LastHash: GenesisHash}
	err := q.QueryRowxContext(ctx, `SELECT id, row_hash FROM metered_usage ORDER BY id DESC LIMIT 1`).Scan(&c.LastID, &c.LastHash)
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("load ledger head: %w", err)
	}
	return c, nil
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

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
