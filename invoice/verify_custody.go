package invoice

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// The custody checks: the receipts' own hash chain, where both chains end,
// stored bodies, and replayed statuses. Together with the ledger chain and an
// anchor they make a deleted or edited receipt, and a truncated tail of either
// chain, detectable.

// notChained is the result of a custody check on a database from before the
// receipts chain: a problem, because nothing can be proved about it.
func notChained(c ledger.CheckResult) ledger.CheckResult {
	c.Add(ledger.Problem{Table: "chain_head", Msg: ledger.ErrNotChained.Error()})
	return c
}

// verifyReceiptChain recomputes every receipt's row hash from its custody
// facts and its predecessor's hash. An edited receipt fails its own hash; a
// deleted one breaks the link to the next, unless retention deleted it (its
// id is at or below receipts_pruned_through). An id jump whose link still
// holds is a gap that existed when the migration chained the receipts. An
// incremental verify walks from the anchored receipt, linked to the stored
// hash of the receipt before it.
func verifyReceiptChain(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "receipt chain", From: s.From(s.Rows(ledger.ChainReceipts, "from"))}
	pruned, err := db.ReceiptsPrunedThrough(ctx)
	if errors.Is(err, ledger.ErrNotChained) {
		return notChained(c), nil
	}
	if err != nil {
		return c, err
	}
	prevID, prev := int64(0), ledger.GenesisHash
	if s.Receipts > 0 {
		id, hash, ok, err := db.HashBefore(ctx, "receipts", s.Receipts)
		if err != nil {
			return c, err
		}
		if ok {
			prevID, prev = id, hash
		}
	}
	err = db.ScanReceiptLinks(ctx, max(s.Receipts-1, 0), func(l *ledger.ReceiptLink) error {
		c.Checked++
		if !bytes.Equal(l.PrevHash, prev) {
			switch {
			case l.ID != prevID+1 && l.ID-1 <= pruned:
				// Retention deleted the receipts in between, and their
				// hashes with them: the link cannot be checked.
			case l.ID != prevID+1:
				c.Add(ledger.Problem{Table: "receipts", ID: l.ID, Msg: fmt.Sprintf("%s missing: deleted receipts (retention deleted none after receipt %d)",
					idRange("receipt", prevID+1, l.ID-1), pruned)})
			default:
				c.Add(ledger.Problem{Table: "receipts", ID: l.ID, Msg: fmt.Sprintf("prev_hash does not match receipt %d's row_hash: the chain was rewritten", prevID)})
			}
		}
		if !bytes.Equal(l.Hash(l.PrevHash), l.RowHash) {
			c.Add(ledger.Problem{Table: "receipts", ID: l.ID, Msg: fmt.Sprintf("row_hash does not match the receipt's custody facts (%s/%s, type %q, status %s, source %s): the receipt was changed after it was written",
				l.Provider, l.EventID, l.EventType, l.Status, l.Source)})
		}
		prevID, prev = l.ID, append(prev[:0:0], l.RowHash...)
		return nil
	})
	return c, err
}

// idRange names rows from..to with the verb that follows: "receipt 6 is",
// "receipts 6 to 8 are".
func idRange(what string, from, to int64) string {
	if from == to {
		return fmt.Sprintf("%s %d is", what, from)
	}
	return fmt.Sprintf("%ss %d to %d are", what, from, to)
}

// verifyHead compares where each chain ends with the chain head the writer
// advanced in the same transaction: deleting the newest rows of a chain,
// which breaks no link, leaves the head pointing past them. It reads two
// rows, so an incremental verify runs it in full too.
func verifyHead(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "chain head", From: s.Whole("the last row of each chain")}
	head, err := ledger.LoadHead(ctx, db)
	if errors.Is(err, ledger.ErrNotChained) {
		return notChained(c), nil
	}
	if err != nil {
		return c, err
	}
	pruned, err := db.ReceiptsPrunedThrough(ctx)
	if err != nil {
		return c, err
	}
	for _, ch := range []struct {
		table, what string
		head        ledger.Chain
		pruned      int64 // rows at or below may be missing on purpose
		lastID      func(context.Context) (int64, error)
		rowHash     func(context.Context, int64) ([]byte, error)
	}{
		{"metered_usage", "ledger row", head.Ledger, 0, db.LastLedgerID, db.LedgerRowHash},
		{"receipts", "receipt", head.Receipts, pruned, db.LastReceiptID, db.ReceiptRowHash},
	} {
		c.Checked++
		last := ledger.Chain{LastHash: ledger.GenesisHash}
		if last.LastID, err = ch.lastID(ctx); err != nil {
			return c, err
		}
		if last.LastID > 0 {
			if last.LastHash, err = ch.rowHash(ctx, last.LastID); err != nil {
				return c, err
			}
		}
		switch {
		case last.LastID < ch.head.LastID && ch.head.LastID <= ch.pruned:
			// Retention deleted the newest receipts (nothing arrived since).
		case last.LastID < ch.head.LastID:
			c.Add(ledger.Problem{Table: ch.table, ID: ch.head.LastID, Msg: fmt.Sprintf("%s missing: the chain head is at %d but the last row is %d: the newest rows were deleted",
				idRange(ch.what, max(last.LastID, ch.pruned)+1, ch.head.LastID), ch.head.LastID, last.LastID)})
		case last.LastID > ch.head.LastID:
			c.Add(ledger.Problem{Table: ch.table, ID: last.LastID, Msg: fmt.Sprintf("%s past the chain head %d: rows were written outside the writer",
				idRange(ch.what, ch.head.LastID+1, last.LastID), ch.head.LastID)})
		case !bytes.Equal(last.LastHash, ch.head.LastHash):
			c.Add(ledger.Problem{Table: ch.table, ID: last.LastID, Msg: "the last row's row_hash differs from the chain head's: the chain was rewritten"})
		}
	}
	return c, nil
}

// verifyBodies recomputes SHA-256 of every stored body. Retention's payload
// pruning sets body to NULL and keeps body_sha256 (which the receipts chain
// covers), so a pruned body is not checked and not a problem; a body gone
// without a prune is one (an empty body may be stored as NULL: it hashes as
// empty). An incremental verify checks the receipts after the anchor.
func verifyBodies(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "receipt bodies", From: s.From(s.Rows(ledger.ChainReceipts, "after"))}
	err := db.ScanStoredBodies(ctx, s.Receipts, func(b *schema.StoredBody) error {
		c.Checked++
		got := sha256.Sum256(b.Body)
		switch {
		case bytes.Equal(got[:], b.BodySHA256):
		case b.Body == nil:
			c.Add(ledger.Problem{Table: "receipts", ID: b.ID, Msg: fmt.Sprintf("receipt %s/%s: the body is gone, and no retention.payload prune covers it (a prune clears the signature headers too, and records how far it went): the body was deleted after it was received",
				b.Provider, b.EventID)})
		default:
			c.Add(ledger.Problem{Table: "receipts", ID: b.ID, Msg: fmt.Sprintf("receipt %s/%s: the stored body hashes to %x, not its body_sha256 %x: the body was changed after it was received",
				b.Provider, b.EventID, got, b.BodySHA256)})
		}
		return nil
	})
	return c, err
}

// verifyStatuses follows each replayed receipt's replays from the status it
// was stored with (which the receipts chain covers) to its status now: each
// replay must start where the previous one ended, and the last must end at
// the current status. A receipt never replayed has its current status in its
// hash, so the receipt chain check covers it. Replays are operators'
// repairs, few and not chained: an incremental verify follows them all.
func verifyStatuses(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "receipt status", From: s.Whole("every replay")}
	var (
		lastReceipt, lastReplay int64
		lastTo, lastStatus      string
		lastName                string
	)
	finish := func() {
		if lastReceipt != 0 && lastTo != lastStatus {
			c.Add(ledger.Problem{Table: "receipts", ID: lastReceipt, Msg: fmt.Sprintf("receipt %s has status %q, but its last replay (replays row %d) left it %q: the status was changed outside a replay",
				lastName, lastStatus, lastReplay, lastTo)})
		}
	}
	err := db.ScanReplaySteps(ctx, func(s *schema.ReplayStep) error {
		if s.ID != lastReceipt {
			finish()
			c.Checked++
		} else if s.FromStatus != lastTo {
			c.Add(ledger.Problem{Table: "replays", ID: s.ReplayID, Msg: fmt.Sprintf("replay of %s/%s starts from %q, but the replay before it (row %d) left %q: the replays were changed",
				s.Provider, s.EventID, s.FromStatus, lastReplay, lastTo)})
		}
		lastReceipt, lastReplay, lastTo, lastStatus, lastName = s.ID, s.ReplayID, s.ToStatus, s.Status, s.Provider+"/"+s.EventID
		return nil
	})
	if err != nil {
		return c, err
	}
	finish()
	return c, nil
}
