package ledger

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/hookledger/hookledger/schema"
)

// Head is where both hash chains end: the ledger (metered_usage) and the
// receipts. It lives in the one-row chain_head table, which every write batch
// reads once and advances once inside its transaction: free under SQLite's
// single writer, and on a shared database the row lock orders batches (never
// single rows) across writers.
type Head struct {
	Ledger   Chain
	Receipts Chain
}

// ErrNotChained means the database predates the chain_head table.
var ErrNotChained = schema.ErrNotChained

// LoadHead reads the head of both chains.
func LoadHead(ctx context.Context, src HeadSource) (Head, error) {
	h, err := src.LatestHead(ctx)
	if err != nil {
		return Head{}, err
	}
	return Head{
		Ledger:   Chain{LastID: h.LedgerID, LastHash: h.LedgerHash},
		Receipts: Chain{LastID: h.ReceiptID, LastHash: h.ReceiptHash},
	}, nil
}

// Chain names, as anchors spell them.
const (
	ChainLedger   = "ledger"   // metered_usage rows; the id is metered_usage.id
	ChainReceipts = "receipts" // receipts; the id is receipts.id
	ChainCloses   = "closes"   // closes; the id is period_closes.id, the hash its seal's row_hash
	ChainCredits  = "credits"  // the credit ledger; the id is credit_entries.id
)

// Anchor is a chain position recorded outside the database (serve's log, a
// cron'd `ledger head`): the row with ID in Chain must still exist with this
// row_hash. It is written chain:id:hash, e.g. ledger:42:9f86d0….
type Anchor struct {
	Chain string `json:"chain"`
	ID    int64  `json:"id"`
	Hash  []byte `json:"-"`
}

func (a Anchor) String() string { return fmt.Sprintf("%s:%d:%x", a.Chain, a.ID, a.Hash) }

// Anchors returns the head as one anchor per chain.
func (h Head) Anchors() []Anchor {
	return []Anchor{
		{Chain: ChainLedger, ID: h.Ledger.LastID, Hash: h.Ledger.LastHash},
		{Chain: ChainReceipts, ID: h.Receipts.LastID, Hash: h.Receipts.LastHash},
	}
}

// ParseAnchor parses chain:id:hash.
func ParseAnchor(s string) (Anchor, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 3 {
		return Anchor{}, fmt.Errorf("anchor %q: want chain:id:hash, e.g. ledger:42:<64 hex digits>", s)
	}
	a := Anchor{Chain: parts[0]}
	if a.Chain != ChainLedger && a.Chain != ChainReceipts && a.Chain != ChainCloses && a.Chain != ChainCredits {
		return Anchor{}, fmt.Errorf("anchor %q: chain %q is not %s, %s, %s or %s", s, a.Chain, ChainLedger, ChainReceipts, ChainCloses, ChainCredits)
	}
	id, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || id < 0 {
		return Anchor{}, fmt.Errorf("anchor %q: id %q is not a row id", s, parts[1])
	}
	a.ID = id
	if a.Hash, err = hex.DecodeString(parts[2]); err != nil || len(a.Hash) != len(GenesisHash) {
		return Anchor{}, fmt.Errorf("anchor %q: hash is not 64 hex digits", s)
	}
	return a, nil
}

// anchorToken finds anchors inside other text: serve's log lines (text or
// JSON) and `ledger head` output carry them as one word.
var anchorToken = regexp.MustCompile(`\b(?:ledger|receipts|closes|credits):[0-9]+:[0-9A-Za-z]*`)

// ParseAnchors reads every anchor in r, one or more per line, so a file of
// serve's log lines or of `ledger head` output can be used as it is; lines
// without an anchor are skipped. An anchor-like word that does not parse is
// an error naming its line, and so is a file with no anchor at all.
func ParseAnchors(r io.Reader) ([]Anchor, error) {
	var out []Anchor
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20) // log lines can be long
	for n := 1; sc.Scan(); n++ {
		for _, tok := range anchorToken.FindAll(sc.Bytes(), -1) {
			a, err := ParseAnchor(string(tok))
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			out = append(out, a)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no anchors (chain:id:hash) found")
	}
	return out, nil
}

// VerifyAnchors checks that every anchored row still exists with the
// anchored hash. The chain checks prove each stored hash matches its row and
// its predecessor, so an anchored hash that still matches pins every row up
// to it. A receipt that retention deleted cannot be checked; that is a note,
// not a problem.
func VerifyAnchors(ctx context.Context, db AnchorReads, name string, anchors []Anchor) (CheckResult, error) {
	c := CheckResult{Name: name}
	if len(anchors) == 0 {
		return c, nil
	}
	head, err := LoadHead(ctx, db)
	if err != nil && !errors.Is(err, ErrNotChained) {
		return c, err
	}
	var prunedThrough int64
	if err == nil {
		if prunedThrough, err = db.ReceiptsPrunedThrough(ctx); err != nil {
			return c, err
		}
	}
	for _, a := range anchors {
		table, rowHash := "metered_usage", db.LedgerRowHash
		switch a.Chain {
		case ChainReceipts:
			table, rowHash = "receipts", db.ReceiptRowHash
		case ChainCloses:
			table, rowHash = "close_seals", db.CloseSealHash
		case ChainCredits:
			table, rowHash = "credit_entries", db.CreditRowHash
		}
		stored, err := rowHash(ctx, a.ID)
		switch {
		case a.ID == 0 && bytes.Equal(a.Hash, GenesisHash):
			// The anchor of an empty chain: nothing to pin yet.
		case errors.Is(err, schema.ErrNoCredits):
			c.Notes = append(c.Notes, fmt.Sprintf("anchor %s: the database predates credits; not checked", a))
			continue
		case errors.Is(err, schema.ErrNotSealed):
			c.Notes = append(c.Notes, fmt.Sprintf("anchor %s: the database predates close seals; not checked", a))
			continue
		case err != nil && !errors.Is(err, schema.ErrNotFound):
			return c, err
		case err != nil && a.Chain == ChainReceipts && a.ID <= prunedThrough:
			c.Notes = append(c.Notes, fmt.Sprintf("anchor %s: receipt %d was deleted by retention (keys); not checked", a, a.ID))
			continue
		case err != nil && a.Chain == ChainCloses:
			last, _, lerr := db.LastCloseSeal(ctx)
			if lerr != nil {
				return c, lerr
			}
			c.Add(Problem{Table: table, ID: a.ID, Msg: fmt.Sprintf("anchor %s: close %d's seal is missing (the last seal is close %d's): closes and their invoices were deleted", a, a.ID, last)})
		case err != nil && a.Chain == ChainCredits:
			last, lerr := db.LastCredit(ctx)
			if lerr != nil {
				return c, lerr
			}
			c.Add(Problem{Table: table, ID: a.ID, Msg: fmt.Sprintf("anchor %s: credit entry %d is missing (the last is %d): anchored entries were deleted", a, a.ID, last.ID)})
		case err != nil:
			last := head.Ledger.LastID
			if a.Chain == ChainReceipts {
				last = head.Receipts.LastID
			}
			c.Add(Problem{Table: table, ID: a.ID, Msg: fmt.Sprintf("anchor %s: row %d is missing (the chain head is at %d): anchored rows were deleted", a, a.ID, last)})
		case !bytes.Equal(stored, a.Hash):
			c.Add(Problem{Table: table, ID: a.ID, Msg: fmt.Sprintf("anchor %s: row %d's row_hash is %x: the chain was rewritten since the anchor was taken", a, a.ID, stored)})
		}
		c.Checked++
	}
	return c, nil
}
