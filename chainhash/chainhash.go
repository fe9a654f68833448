// Package chainhash holds what the receipts' hash chain commits to and how it
// is hashed. It is a leaf: the ledger links receipts with it, and so does the
// storage backend's migration 0005, which chained the receipts that predate
// the chain. schema imports no domain package, so the one hash both need
// lives here rather than in ledger.
package chainhash

import (
	"crypto/sha256"
	"encoding/binary"
)

// Genesis is the prev_hash of the first row of either chain (ledger rows and
// receipts).
var Genesis = make([]byte, sha256.Size)

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

// Hash returns SHA-256 over prev and the link's fields, each length-prefixed
// like a ledger row's hash (ledger's canon encoding); the leading tag keeps a
// receipt's encoding from ever equalling a ledger row's. It runs for every
// delivery on the writer's hot path, so it encodes into one stack buffer
// instead of through per-field writes.
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
