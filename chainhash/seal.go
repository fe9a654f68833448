package chainhash

import (
	"crypto/sha256"
	"encoding/binary"
)

// SealedInvoice is one invoice as a close's seal counts it: its id and the
// digest stored with it (which covers its fields and lines).
type SealedInvoice struct {
	ID     int64
	Digest []byte
}

// InvoicesDigest is SHA-256 over the invoices' ids and digests, in the order
// given (a close writes them in id order). A close's seal keeps it, so an
// invoice deleted, added or swapped after the close no longer matches.
func InvoicesDigest(invs []SealedInvoice) []byte {
	h := sha256.New()
	b := make([]byte, 0, 64)
	b = appendStr(b, "hookledger-close-invoices-v1")
	b = binary.BigEndian.AppendUint64(b, uint64(len(invs)))
	h.Write(b)
	for _, inv := range invs {
		b = binary.BigEndian.AppendUint64(b[:0], uint64(inv.ID))
		b = appendBytes(b, inv.Digest)
		h.Write(b)
	}
	return h.Sum(nil)
}

// CloseSeal is what the closes' hash chain commits to for one period close:
// the close's own fields, how many invoices it wrote and their digest. The
// chain runs in close id order; deleting or editing a close, its seal or any
// of its invoices breaks it, and an anchor on the last seal (`ledger head`)
// catches a truncated tail.
type CloseSeal struct {
	CloseID        int64
	Customer       string // "" for a close of every customer
	Period         string
	TZ             string
	PeriodStart    int64
	PeriodEnd      int64
	GraceMS        int64
	Cutoff         int64
	LedgerHead     int64
	ClosedAt       int64
	Invoices       int64
	InvoicesDigest []byte
	PrevHash       []byte
	RowHash        []byte
}

// Hash returns SHA-256 over prev and the seal's fields, length-prefixed like
// the other chains' links; the leading tag keeps a seal's encoding from ever
// equalling a ledger row's or a receipt's.
func (s *CloseSeal) Hash(prev []byte) []byte {
	b := make([]byte, 0, 256)
	b = appendStr(b, "hookledger-close-v1")
	b = append(b, prev...)
	b = binary.BigEndian.AppendUint64(b, uint64(s.CloseID))
	b = appendStr(b, s.Customer)
	b = appendStr(b, s.Period)
	b = appendStr(b, s.TZ)
	for _, v := range []int64{s.PeriodStart, s.PeriodEnd, s.GraceMS, s.Cutoff, s.LedgerHead, s.ClosedAt, s.Invoices} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	b = appendBytes(b, s.InvoicesDigest)
	sum := sha256.Sum256(b)
	return sum[:]
}

func appendStr(b []byte, s string) []byte {
	return append(binary.BigEndian.AppendUint64(b, uint64(len(s))), s...)
}

func appendBytes(b, v []byte) []byte {
	return append(binary.BigEndian.AppendUint64(b, uint64(len(v))), v...)
}
