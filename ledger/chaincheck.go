package ledger

import (
	"bytes"
	"context"
	"fmt"

	"github.com/hookledger/hookledger/schema"
)

// A ledger row's place in the hash chain, as verify and the dispute trace
// both check it (checkLink with its messages, checkRowLinks), so they can
// never disagree about a link.

// LinkSource is what checking single rows' places in the chain reads.
type LinkSource interface {
	LedgerLinks(ctx context.Context, ids []int64) (map[int64]schema.Link, error)
	LedgerLinkBefore(ctx context.Context, id int64) (schema.Link, bool, error)
	LedgerLinkAfter(ctx context.Context, id int64) (schema.Link, bool, error)
	LastLedgerID(ctx context.Context) (int64, error)
}

// ChainBreak is how the link between two consecutive ledger rows fails.
type ChainBreak int

const (
	LinkHolds    ChainBreak = iota
	idsJump                 // the ids are not consecutive: rows between them were deleted
	prevMismatch            // the later row's prev_hash is not the earlier row's row_hash
)

// GenesisLink stands before the first row of the ledger chain.
var GenesisLink = schema.Link{ID: 0, RowHash: GenesisHash}

// CheckLink checks the link from a to b, the row after a in id order (a is
// genesisLink before the first row). It compares stored hashes only, so one
// edited row is reported once (by its own hash, see rowChanged) and damage
// further on separately.
func CheckLink(a, b schema.Link) ChainBreak {
	switch {
	case b.ID != a.ID+1:
		return idsJump
	case !bytes.Equal(b.PrevHash, a.RowHash):
		return prevMismatch
	}
	return LinkHolds
}

// LinkMessage words a broken link between rows a and b as seen from row
// self, which is one of them: verify's walk and the trace's link to the row
// before speak from b, the trace's link to the row after from a.
func LinkMessage(k ChainBreak, a, b, self int64) string {
	switch {
	case k == idsJump:
		return fmt.Sprintf("ids jump from %d to %d: rows were deleted", a, b)
	case k == prevMismatch && self == b:
		return fmt.Sprintf("prev_hash does not match row %d's row_hash: the chain was rewritten", a)
	case k == prevMismatch:
		return fmt.Sprintf("row %d's prev_hash does not match this row's row_hash: this row was rewritten", b)
	}
	return ""
}

// RowChanged reports whether r's row_hash no longer recomputes from its
// contents and prev_hash, or its quantity columns are not the ones its
// quantity is stored as (an edit that kept the value, e.g. 2 with 0 decimals
// for 2000000 with 6, still edited the row).
func RowChanged(r *Row) bool { return r.altered || !bytes.Equal(r.Hash(r.PrevHash), r.RowHash) }

// RowChangedMessage words a changed row. Verify names the row's contents;
// the trace shows them beside the message.
func RowChangedMessage(r *Row, named bool) string {
	what := ""
	if named {
		what = fmt.Sprintf(" (customer %q, meter %q, quantity %s)", r.Customer, r.Meter, r.Quantity)
	}
	return "row_hash does not match the row's contents" + what + ": the row was changed after it was written"
}

func (r *Row) Link() schema.Link {
	return schema.Link{ID: r.ID, PrevHash: r.PrevHash, RowHash: r.RowHash}
}

// CheckRowLinks checks each row's place in the chain: its row_hash
// recomputes from its contents, its prev_hash is the row_hash of the row
// before, and the next row's prev_hash is its row_hash (a rewritten row
// whose own hash was recomputed shows up there). It reads the neighbours of
// all the rows at once (two queries for any number of rows), and the nearest
// row on either side of a gap one by one. Problems are keyed by row id; rows
// whose links hold are absent. Only the whole chain (Verify) proves nothing
// before a row was rewritten.
func CheckRowLinks(ctx context.Context, src LinkSource, rows []Row) (map[int64]string, error) {
	problems := map[int64]string{}
	ids := make([]int64, 0, 2*len(rows))
	for _, r := range rows {
		if r.ID > 1 {
			ids = append(ids, r.ID-1)
		}
		ids = append(ids, r.ID+1)
	}
	near, err := src.LedgerLinks(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read ledger rows: %w", err)
	}
	head, err := src.LastLedgerID(ctx)
	if err != nil {
		return nil, fmt.Errorf("read ledger head: %w", err)
	}
	for i := range rows {
		r := &rows[i]
		if RowChanged(r) {
			problems[r.ID] = RowChangedMessage(r, false)
			continue
		}
		self := r.Link()
		prev, ok := near[r.ID-1]
		if !ok {
			prev = GenesisLink
			if r.ID > 1 {
				// A gap below: the nearest row that is left.
				if p, found, err := src.LedgerLinkBefore(ctx, r.ID); err != nil {
					return nil, fmt.Errorf("read ledger row before %d: %w", r.ID, err)
				} else if found {
					prev = p
				}
			}
		}
		if k := CheckLink(prev, self); k != LinkHolds {
			problems[r.ID] = LinkMessage(k, prev.ID, r.ID, r.ID)
			continue
		}
		next, ok := near[r.ID+1]
		if !ok && r.ID < head {
			// A gap above.
			if next, ok, err = src.LedgerLinkAfter(ctx, r.ID); err != nil {
				return nil, fmt.Errorf("read ledger row after %d: %w", r.ID, err)
			}
		}
		if !ok {
			continue // the head of the chain
		}
		if k := CheckLink(self, next); k != LinkHolds {
			problems[r.ID] = LinkMessage(k, r.ID, next.ID, r.ID)
		}
	}
	return problems, nil
}
