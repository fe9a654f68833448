package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash"

	"github.com/hookledger/hookledger/chainhash"
)

// Row kinds in metered_usage.
const (
	KindUsage      = "usage"
	KindAdjustment = "adjustment"
	// KindVoid compensates one usage row (ref row:ID) of a voided event
	// (void.go): the voided row stays, and aggregates leave it out.
	KindVoid = "void"
)

// Row is one append-only ledger row. Storage keeps it as a
// schema.LedgerRow (StoredRow reads one back).
type Row struct {
	ID         int64  `json:"id"`
	Kind       string `json:"kind"`
	Provider   string `json:"provider"`
	EventID    string `json:"event_id"`
	Customer   string `json:"customer"`
	Meter      string `json:"meter"`
	Quantity   Total  `json:"quantity"`
	Properties string `json:"properties"`
	Reason     string `json:"reason,omitempty"`
	Ref        string `json:"ref,omitempty"`
	OccurredAt int64  `json:"occurred_at_ms"`
	RecordedAt int64  `json:"recorded_at_ms"`
	PrevHash   []byte `json:"-"`
	RowHash    []byte `json:"-"`
	// ReceiptID is the receipt that applied a usage row (0: none). It is
	// stored as the row's ordered key (schema: metered_usage_receipt), and
	// not hashed.
	ReceiptID int64 `json:"-"`

	// altered marks a row read from storage whose quantity columns are not
	// the ones Quantity would be stored as (RowParts): the columns were
	// edited, even if the value they spell is the same.
	altered bool
}

// Hash returns SHA-256 over prev and the row's canonical encoding: every field
// but the hashes, each length-prefixed (Canon) so no two rows encode alike.
// A row stored with 6 decimals (every row written before wide quantities,
// and every ordinary row since) hashes as it always did; a wide row (fewer
// decimals, RowParts) hashes as v2: a leading tag, and its decimals after
// its quantity, so the chain commits to both columns.
func (r *Row) Hash(prev []byte) []byte {
	q, decimals, _ := r.Quantity.RowParts()
	wide := decimals != RowDecimals
	c := NewCanon()
	if wide {
		c.Str("hookledger-row-v2")
	}
	c.Raw(prev)
	c.Int(r.ID)
	c.Str(r.Kind)
	c.Str(r.Provider)
	c.Str(r.EventID)
	c.Str(r.Customer)
	c.Str(r.Meter)
	c.Int(q)
	if wide {
		c.Int(int64(decimals))
	}
	c.Str(r.Properties)
	c.Str(r.Reason)
	c.Str(r.Ref)
	c.Int(r.OccurredAt)
	c.Int(r.RecordedAt)
	return c.Sum()
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
	if _, _, ok := r.Quantity.RowParts(); !ok {
		return fmt.Errorf("usage row for %s/%s meter %s: quantity %s: %w", r.Provider, r.EventID, r.Meter, r.Quantity, errRowRange)
	}
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

// Canon writes length-prefixed fields (Row.Hash, invoice digests), so no two different
// records encode to the same bytes.
type Canon struct{ h hash.Hash }

func NewCanon() Canon { return Canon{sha256.New()} }

func (c Canon) Int(v int64) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(v))
	c.h.Write(n[:])
}

func (c Canon) Str(s string) { c.Int(int64(len(s))); c.h.Write([]byte(s)) }

func (c Canon) Bytes(b []byte) { c.Int(int64(len(b))); c.h.Write(b) }

func (c Canon) Sum() []byte { return c.h.Sum(nil) }

// Raw writes b as it is, without its length: a hash of fixed size.
func (c Canon) Raw(b []byte) { c.h.Write(b) }
