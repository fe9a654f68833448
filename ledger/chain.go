package ledger

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hookledger/hookledger/ledger/chainhash"
)

// Row kinds in metered_usage.
const (
	KindUsage      = "usage"
	KindAdjustment = "adjustment"
)

// Row is one append-only ledger row. Storage keeps it as a
// schema.LedgerRow; the db tags let tests that tamper with the database
// read rows into it directly.
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
var GenesisHash = chainhash.Genesis

// Chain is the head of one hash chain inside one write transaction. It is
// loaded (LoadHead) once the transaction holds the write lock, so no other
// writer can move the head meanwhile.
type Chain struct {
	LastID   int64
	LastHash []byte
}

// LoadChain reads the head of the ledger chain.
func LoadChain(ctx context.Context, src HeadSource) (Chain, error) {
	h, err := LoadHead(ctx, src)
	return h.Ledger, err
}

// Append links r to the chain and stores it with ins (the writer's prepared
// insert). On error the chain is unchanged.
func (c *Chain) Append(ctx context.Context, ins RowInserter, r *Row) error {
	r.ID = c.LastID + 1
	r.PrevHash = c.LastHash
	r.RowHash = r.Hash(r.PrevHash)
	if err := ins.InsertLedgerRow(ctx, r.record()); err != nil {
		return fmt.Errorf("insert usage row for %s/%s meter %s: %w", r.Provider, r.EventID, r.Meter, err)
	}
	c.LastID, c.LastHash = r.ID, r.RowHash
	return nil
}

// ReceiptLink is what the receipts chain commits to for one receipt (see
// chainhash.ReceiptLink, which the storage backend's migration 0005 hashes
// with too).
type ReceiptLink = chainhash.ReceiptLink

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

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
