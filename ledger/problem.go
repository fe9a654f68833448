package ledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookledger/hookledger/schema"
)

// What every check of verify reports (Problem, CheckResult) and where it
// starts (since), for the checks in this package and those above it.

// Problem is one thing verify found broken, located by table and row id.
type Problem struct {
	Check string `json:"check"`
	Table string `json:"table"`
	ID    int64  `json:"id"` // row id in Table (0 when the problem has no row)
	Msg   string `json:"message"`
}

func (p Problem) Error() string {
	if p.ID == 0 {
		return fmt.Sprintf("%s: %s", p.Table, p.Msg)
	}
	return fmt.Sprintf("%s row %d: %s", p.Table, p.ID, p.Msg)
}

// CheckResult is the outcome of one verification check.
type CheckResult struct {
	Name     string    `json:"name"`
	Checked  int64     `json:"checked"` // rows, receipts or invoice lines examined
	Problems []Problem `json:"problems"`
	// Notes are what the check could not examine and why; not failures.
	Notes []string `json:"notes,omitempty"`
	// Skipped is why the check did not run at all (empty when it ran): on
	// PostgreSQL, the page and index checks when amcheck is missing or not
	// granted. A skipped check is not a failure: verify's other checks prove
	// the ledger without it, and the report says what was left out.
	Skipped string `json:"skipped,omitempty"`
	// From says what an incremental verify (VerifySince) checked, e.g.
	// "incremental: ledger rows from 12"; empty in a full verify.
	From string `json:"from,omitempty"`
}

// OK reports whether the check found nothing wrong.
func (c CheckResult) OK() bool { return len(c.Problems) == 0 }

// MaxProblems bounds each check's list: the first one is what matters, a few
// more show whether the damage is local.
const MaxProblems = 20

func (c *CheckResult) Add(p Problem) {
	if len(c.Problems) < MaxProblems {
		p.Check = c.Name
		c.Problems = append(c.Problems, p)
	}
}

// Since is where every check of one verify starts, decided here for all of
// them: on each chain, the id of the row its anchor names (the rows above it
// are new), or 0 to check the chain from its first row (a full verify, or a
// chain the anchors given do not name).
type Since struct {
	Incremental              bool
	Ledger, Receipts, Closes int64
	Credits                  int64
	Named                    map[string]bool // the chains an anchor was given for
}

func (s Since) ChainID(chain string) int64 {
	switch chain {
	case ChainLedger:
		return s.Ledger
	case ChainReceipts:
		return s.Receipts
	case ChainCloses:
		return s.Closes
	}
	return s.Credits
}

// chainRows names one row of each chain, and several.
var chainRows = map[string][2]string{
	ChainLedger:   {"ledger row", "ledger rows"},
	ChainReceipts: {"receipt", "receipts"},
	ChainCloses:   {"close", "closes"},
	ChainCredits:  {"credit entry", "credit entries"},
}

// Rows names what a check read of chain, from or after (rel) its anchor:
// "ledger rows after 12", "every receipt (no receipts anchor)".
func (s Since) Rows(chain, rel string) string {
	names := chainRows[chain]
	switch {
	case !s.Named[chain]:
		return fmt.Sprintf("every %s (no %s anchor)", names[0], chain)
	case s.ChainID(chain) == 0:
		return fmt.Sprintf("every %s (anchored at 0)", names[0])
	}
	return fmt.Sprintf("%s %s %d", names[1], rel, s.ChainID(chain))
}

// From is what a check of an incremental verify covered, in the report's
// words ("" in a full verify): parts are since.rows or a sentence.
func (s Since) From(parts ...string) string {
	if !s.Incremental {
		return ""
	}
	return "incremental: " + strings.Join(parts, ", ")
}

// Whole says what a check an incremental verify runs in full covers ("" in
// a full verify): the chain head and the replays, which are small.
func (s Since) Whole(what string) string {
	if !s.Incremental {
		return ""
	}
	return "in full: " + what
}

// What the checks in this package read (VerifySource has all of them).

// AnchorReads is what checking anchors reads: each chain's stored hashes
// and ends, and how far retention deleted receipts.
type AnchorReads interface {
	HeadSource
	ReceiptsPrunedThrough(ctx context.Context) (int64, error)
	LedgerRowHash(ctx context.Context, id int64) ([]byte, error)
	ReceiptRowHash(ctx context.Context, id int64) ([]byte, error)
	CloseSealHash(ctx context.Context, id int64) ([]byte, error)
	CreditRowHash(ctx context.Context, id int64) ([]byte, error)
	LastCloseSeal(ctx context.Context) (int64, []byte, error)
	LastCredit(ctx context.Context) (schema.CreditEntry, error)
}

// SnapshotReads reads in one snapshot (the usage state's check).
type SnapshotReads interface {
	View(ctx context.Context, fn func(tx *schema.ReadTx) error) error
}

// VoidReads is what checking the voids reads.
type VoidReads interface {
	VoidRows(ctx context.Context, afterID int64, limit int) ([]schema.LedgerRow, error)
	GetLedgerRow(ctx context.Context, id int64) (*schema.LedgerRow, error)
}
