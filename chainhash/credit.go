package chainhash

import (
	"crypto/sha256"
	"encoding/binary"
)

// CreditEntry is one row of the credit ledger (credit_entries, migration
// 0029) and what its hash chain commits to: every field but the hashes.
// The chain runs in id order; an edited amount or balance, or a deleted or
// inserted entry, breaks it, and an anchor on the last entry (`ledger head`)
// catches a truncated tail.
type CreditEntry struct {
	ID          int64  `db:"id"`
	Kind        string `db:"kind"`     // grant | burn | void | expiry
	GrantID     string `db:"grant_id"` // the grant's id (its --id, or one hookledger chose)
	Customer    string `db:"customer_id"`
	Currency    string `db:"currency"`
	Amount      string `db:"amount"`  // granted; given to an invoice; or forfeited by a void or expiry
	Balance     string `db:"balance"` // the grant's balance after this entry
	Category    string `db:"category"`
	Priority    int64  `db:"priority"`
	EffectiveAt int64  `db:"effective_at"`
	ExpiresAt   int64  `db:"expires_at"` // 0: never
	InvoiceID   int64  `db:"invoice_id"` // a burn's invoice; 0 otherwise
	Reason      string `db:"reason"`
	Actor       string `db:"actor"`
	RecordedAt  int64  `db:"recorded_at"`
	PrevHash    []byte `db:"prev_hash"`
	RowHash     []byte `db:"row_hash"`
}

// Hash returns SHA-256 over prev and the entry's fields, length-prefixed
// like the other chains' links; the leading tag keeps an entry's encoding
// from ever equalling a ledger row's, a receipt's or a seal's.
func (e *CreditEntry) Hash(prev []byte) []byte {
	b := make([]byte, 0, 256)
	b = appendStr(b, "hookledger-credit-v1")
	b = append(b, prev...)
	b = binary.BigEndian.AppendUint64(b, uint64(e.ID))
	for _, s := range []string{e.Kind, e.GrantID, e.Customer, e.Currency, e.Amount, e.Balance, e.Category} {
		b = appendStr(b, s)
	}
	for _, v := range []int64{e.Priority, e.EffectiveAt, e.ExpiresAt, e.InvoiceID} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	b = appendStr(b, e.Reason)
	b = appendStr(b, e.Actor)
	b = binary.BigEndian.AppendUint64(b, uint64(e.RecordedAt))
	sum := sha256.Sum256(b)
	return sum[:]
}
