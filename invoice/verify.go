package invoice

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// VerifyReport is every check's result, in the order they ran.
type VerifyReport struct {
	Checks []ledger.CheckResult `json:"checks"`
	// Since are the anchors an incremental verify started from.
	Since []string `json:"since,omitempty"`
	// Verified is where each chain ended as the verify began (LoadAnchors),
	// when no check found a problem: every check covered the rows up to
	// them, so a later VerifySince can start there. Anchors lists them as
	// chain:id:hash.
	Verified []ledger.Anchor `json:"-"`
	Anchors  []string        `json:"verified_anchors,omitempty"`
}

// First returns the first problem found, or nil if everything verified.
func (r *VerifyReport) First() *ledger.Problem {
	for _, c := range r.Checks {
		if len(c.Problems) > 0 {
			return &c.Problems[0]
		}
	}
	return nil
}

// Verify checks, in order: SQLite's integrity_check; the hash chain over
// every ledger row; that every applied receipt has usage rows and every usage
// row an applied receipt; every closed invoice's digests and numbers against
// the ledger; the receipts' hash chain, both chains' ends against the chain
// head, every stored body against its body_sha256 and every replayed
// receipt's status against its replays (verify_custody.go); that every void
// compensates exactly one usage row, once (ledger/void.go); the usage state
// against the ledger's monthly sums (ledger/state.go); every spend crossing
// against the spend recomputed at its row (spend.go); every close against
// its seal and the closes' chain (seal.go); the credit ledger's chain, its
// balances and each invoice's burns (credits.go), and each credit alert
// against the grant it crossed (creditcrossings.go); that each closed period's usage
// is on an invoice of its close or late, never in a gap no close can fill
// (coverage.go); and that each
// anchor's row still exists with the anchored hash. When no check found a
// problem, the report holds where each chain ended as the checks began
// (Verified): the anchors a later VerifySince can start from
// (verify_since.go). The error is for failures to read, not for findings.
func Verify(ctx context.Context, db VerifySource, anchors ...ledger.Anchor) (*VerifyReport, error) {
	r := &VerifyReport{}
	return r, verify(ctx, db, r, ledger.Since{}, anchors)
}

// verify runs every check from s (a full verify: from the first rows) and
// adds their results to r, then, when none found a problem, the anchors it
// verified up to.
func verify(ctx context.Context, db VerifySource, r *VerifyReport, s ledger.Since, anchors []ledger.Anchor) error {
	// The chains' ends as the checks begin: each check reads at least up to
	// them (rows committed meanwhile are read too, or not).
	heads, err := LoadAnchors(ctx, db)
	if err != nil && !errors.Is(err, ledger.ErrNotChained) {
		return fmt.Errorf("verify: read the chains' ends: %w", err)
	}
	for _, check := range []func(context.Context, VerifySource, ledger.Since) (ledger.CheckResult, error){
		verifyIntegrity, verifyChain, verifyReceipts, verifyInvoices,
		verifyReceiptChain, verifyHead, verifyBodies, verifyStatuses,
		func(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
			return ledger.VerifyVoids(ctx, db, s)
		},
		func(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
			return ledger.VerifyUsageState(ctx, db, s)
		},
		verifySpendCrossings, verifySeals, verifyCredits, verifyCreditCrossings, verifyCoverage,
		func(ctx context.Context, db VerifySource, _ ledger.Since) (ledger.CheckResult, error) {
			return ledger.VerifyAnchors(ctx, db, "anchors", anchors)
		},
	} {
		c, err := check(ctx, db, s)
		if err != nil {
			return fmt.Errorf("verify %s: %w", c.Name, err)
		}
		r.Checks = append(r.Checks, c)
	}
	if r.First() == nil && len(heads) > 0 {
		r.Verified = heads
		for _, a := range heads {
			r.Anchors = append(r.Anchors, a.String())
		}
	}
	return nil
}

func verifyIntegrity(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "integrity_check"}
	if s.Incremental {
		c.Skipped = "incremental verify (--since): the integrity check reads every page of the database; the full verify runs it"
		return c, nil
	}
	msgs, err := db.IntegrityCheck(ctx)
	if errors.Is(err, schema.ErrIntegritySkipped) {
		c.Skipped = err.Error()
	} else if err != nil {
		return c, err
	} else {
		c.Checked = 1
	}
	if len(msgs) == 1 && msgs[0] == "ok" || len(msgs) == 0 {
		return c, nil
	}
	for _, m := range msgs {
		c.Add(ledger.Problem{Table: "database", Msg: "integrity_check: " + m})
	}
	return c, nil
}

// verifyChain recomputes every row hash from the row's contents and the
// previous row's hash. An edited row fails its own hash; a deleted or
// inserted row breaks the link to the next one. An incremental verify
// walks from the anchored row, linked to the stored hash of the row before.
func verifyChain(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "hash chain", From: s.From(s.Rows(ledger.ChainLedger, "from"))}
	prev := ledger.GenesisLink
	if s.Ledger > 0 {
		before, ok, err := db.LedgerLinkBefore(ctx, s.Ledger)
		if err != nil {
			return c, err
		}
		if ok {
			prev = before
		}
	}
	err := db.ScanLedger(ctx, schema.LedgerFilter{AfterID: max(s.Ledger-1, 0)}, func(rec *schema.LedgerRow) error {
		r := ledger.StoredRow(rec)
		c.Checked++
		self := r.Link()
		if k := ledger.CheckLink(prev, self); k != ledger.LinkHolds {
			c.Add(ledger.Problem{Table: "metered_usage", ID: r.ID, Msg: ledger.LinkMessage(k, prev.ID, r.ID, r.ID)})
		}
		if ledger.RowChanged(&r) {
			c.Add(ledger.Problem{Table: "metered_usage", ID: r.ID, Msg: ledger.RowChangedMessage(&r, true)})
		}
		// Continue from the stored hash, so one edit is reported once and
		// any further damage is reported separately.
		prev = self
		return nil
	})
	return c, err
}

// verifyReceipts checks custody against the ledger: an applied receipt
// without usage rows lost its effect; a usage row without an applied receipt
// has no authenticated event behind it.
func verifyReceipts(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "receipts and usage rows", From: s.From(s.Rows(ledger.ChainReceipts, "after"), s.Rows(ledger.ChainLedger, "after"))}
	var err error
	if c.Checked, err = db.CountAppliedReceipts(ctx, s.Receipts); err != nil {
		return c, err
	}
	orphanReceipts, err := db.AppliedWithoutUsage(ctx, s.Receipts, ledger.MaxProblems)
	if err != nil {
		return c, err
	}
	for _, o := range orphanReceipts {
		c.Add(ledger.Problem{Table: "receipts", ID: o.ID, Msg: fmt.Sprintf("applied receipt %s/%s has no usage rows", o.Provider, o.EventID)})
	}
	// Rows retention may have left without their receipt are not listed
	// (see UsageWithoutApplied).
	orphanRows, err := db.UsageWithoutApplied(ctx, s.Ledger, ledger.MaxProblems)
	if err != nil {
		return c, err
	}
	for _, o := range orphanRows {
		c.Add(ledger.Problem{Table: "metered_usage", ID: o.ID, Msg: fmt.Sprintf("usage row has no applied receipt for %s/%s", o.Provider, o.EventID)})
	}
	return c, nil
}

// verifyInvoices recomputes every closed invoice: its digest over its stored
// fields, and each line's rows, digest and quantity from the ledger; checks
// that each holds the lines its close wrote, that no two lines bill the same
// rows, and that every late line fits its invoice (lateFits). An
// incremental verify checks the invoices of the closes after the closes
// anchor, in full, against the other lines of their customers' periods.
func verifyInvoices(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "invoices", From: s.From("the invoices of " + s.Rows(ledger.ChainCloses, "after"))}
	invs, err := listInvoices(ctx, db, InvoiceFilter{AfterClose: s.Closes}, true)
	if err != nil {
		if errors.Is(err, schema.ErrNoInvoices) {
			return c, nil // a database from before invoices existed
		}
		return c, err
	}
	all := invs // what the checks across invoices compare
	if s.Closes > 0 {
		if all, err = invoiceNeighbours(ctx, db, invs); err != nil {
			return c, err
		}
	}
	twice := billedTwice(all)
	var periods []*closedPeriod // read when a late line does not fit its invoice
	for i := range invs {
		inv := &invs[i]
		if d := invoiceDigest(inv); !bytes.Equal(d, inv.Digest) {
			c.Add(ledger.Problem{Table: "invoices", ID: inv.ID, Msg: "stored digest does not match the invoice's fields and lines: the invoice was changed after it was closed"})
		}
		msgs, err := checkInvoiceLines(ctx, db, inv)
		if err != nil {
			return c, err
		}
		for _, msg := range msgs {
			c.Add(ledger.Problem{Table: "invoices", ID: inv.ID, Msg: msg})
		}
		before := map[int64]string{}
		for _, l := range inv.Lines {
			c.Checked++
			chk, err := checkLine(ctx, db, l, false)
			if err != nil {
				return c, err
			}
			if chk.Problem != "" {
				c.Add(ledger.Problem{Table: "invoices", ID: inv.ID, Msg: fmt.Sprintf("line %d (%s %s): %s", l.LineNo, meterLabel(l), l.Period, chk.Problem)})
			} else {
				before[l.LineNo] = chk.BilledBefore
			}
			if !l.Late || lateFits(l.PeriodEnd, inv.PeriodStart) {
				continue
			}
			if periods == nil {
				if periods, err = closedPeriods(ctx, db, ""); err != nil {
					return c, err
				}
			}
			if _, doubled := twice[lineKey{inv.ID, l.LineNo}]; chk.Problem == "" && !doubled && preRuleLate(inv, l, periods) {
				c.Notes = append(c.Notes, fmt.Sprintf("invoice %d (%s) line %d bills late %s usage of %s, a later period, as closes did before late usage went only on invoices of later periods; its rows are billed once, totals are not doubled",
					inv.ID, inv.Period, l.LineNo, l.Meter, l.Period))
				continue
			}
			c.Add(ledger.Problem{Table: "invoices", ID: inv.ID, Msg: fmt.Sprintf("late line %d bills %s, which does not end before the invoice's period %s starts", l.LineNo, l.Period, inv.Period)})
		}
		for _, msg := range checkMoney(inv, before) {
			c.Add(ledger.Problem{Table: "invoices", ID: inv.ID, Msg: "money: " + msg})
		}
	}
	for _, p := range sortedProblems(twice) {
		c.Add(p)
	}
	for _, p := range checkPeriodMoney(all) { // periodmoney.go
		c.Add(p)
	}
	return c, nil
}

// preRuleLate reports whether late line l, which does not fit invoice inv
// (lateFits), is what a close wrote before that rule: such a close billed
// the unbilled late usage of every period closed for the customer before it,
// whatever the invoice's own period, from where that period's billing had
// reached. So the line's period lies wholly after the invoice's and was
// closed for the customer at or below the line's first ledger id. Its rows
// and quantity recompute (checkLine) and no other line bills them
// (billedTwice), so the period's total is right; only the line's place is
// older than the rule, and invoices never change.
func preRuleLate(inv *Invoice, l InvoiceLine, periods []*closedPeriod) bool {
	if l.PeriodStart < inv.PeriodEnd {
		return false // the earlier rule never billed the invoice's own period late
	}
	for _, cp := range periods {
		if cp.start == l.PeriodStart && cp.end == l.PeriodEnd {
			head, ok := cp.closedAt(l.Customer)
			return ok && head <= l.AfterID
		}
	}
	return false
}

// lineKey names one invoice line.
type lineKey struct{ invoice, line int64 }

// billedTwice finds the lines that bill ledger rows another line billed
// already. The lines billing one customer's meter in one period cover
// disjoint ranges of ledger ids: the period's own line from the first id to
// its close's head, each late line from where billing had reached to its
// own close's head. Lines whose ranges overlap count rows twice, however
// consistent each one is with the rows it names.
func billedTwice(invs []Invoice) map[lineKey]ledger.Problem {
	type key struct {
		customer, meter, dims string
		start, end            int64
		part                  int64 // a split period's lines bill their parts' rows
	}
	type span struct {
		lineKey
		period         string
		after, through int64
	}
	spans := map[key][]span{}
	for _, inv := range invs {
		for _, l := range inv.Lines {
			k := key{l.Customer, l.Meter, l.Dimensions, l.PeriodStart, l.PeriodEnd, l.PartStart}
			spans[k] = append(spans[k], span{lineKey{inv.ID, l.LineNo}, l.Period, l.AfterID, l.ThroughID})
		}
	}
	twice := map[lineKey]ledger.Problem{}
	for k, ss := range spans {
		slices.SortFunc(ss, func(a, b span) int {
			return cmp.Or(cmp.Compare(a.after, b.after), cmp.Compare(a.invoice, b.invoice), cmp.Compare(a.line, b.line))
		})
		reach := ss[0] // the line reaching furthest so far
		for _, s := range ss[1:] {
			if s.after < reach.through {
				twice[s.lineKey] = ledger.Problem{Table: "invoices", ID: s.invoice, Msg: fmt.Sprintf("line %d (%s %s) bills ledger ids %d to %d again: invoice %d line %d billed them",
					s.line, k.meter, s.period, s.after+1, min(s.through, reach.through), reach.invoice, reach.line)}
			}
			if s.through > reach.through {
				reach = s
			}
		}
	}
	return twice
}

// sortedProblems lists problems keyed by line in invoice and line order.
func sortedProblems(m map[lineKey]ledger.Problem) []ledger.Problem {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b lineKey) int {
		return cmp.Or(cmp.Compare(a.invoice, b.invoice), cmp.Compare(a.line, b.line))
	})
	out := make([]ledger.Problem, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// checkInvoiceLines checks that an invoice holds the lines its close wrote:
// every line is the invoice's customer's and reaches the invoice's ledger
// head (where late lines may go is verifyInvoices' check, by lateFits); the period's own lines cover every row from the first, one line per
// meter that has rows in the period up to the head. checkLine (check.go) proves each
// line matches the rows it names; this proves the lines name the rows they
// should, so rows cannot be left off an invoice by editing its lines and
// recomputing the (unkeyed) digests.
func checkInvoiceLines(ctx context.Context, db VerifySource, inv *Invoice) ([]string, error) {
	var msgs []string
	own := map[string]bool{}       // meters with a line of the period
	ownLine := map[string]bool{}   // meter and dimensions of each such line
	ownPart := map[string]bool{}   // meter and part of each such line
	byValue := map[string]string{} // meter -> the dimension its lines bill it by
	for i, l := range inv.Lines {
		switch {
		case l.LineNo != int64(i+1):
			msgs = append(msgs, fmt.Sprintf("line %d is line number %d: lines were removed or renumbered", i+1, l.LineNo))
		case l.Customer != inv.Customer:
			msgs = append(msgs, fmt.Sprintf("line %d bills customer %q on customer %q's invoice", l.LineNo, l.Customer, inv.Customer))
		case l.ThroughID != inv.LedgerHead:
			msgs = append(msgs, fmt.Sprintf("line %d covers rows up to id %d, the invoice's ledger head is %d", l.LineNo, l.ThroughID, inv.LedgerHead))
		case !l.Late && (l.PeriodStart != inv.PeriodStart || l.PeriodEnd != inv.PeriodEnd || l.AfterID != 0):
			msgs = append(msgs, fmt.Sprintf("line %d covers %s after id %d, not all of the invoice's period %s", l.LineNo, l.Period, l.AfterID, inv.Period))
		}
		if !l.Late {
			name, _, err := lineDimension(l.Dimensions)
			part := l.Meter + "\x00" + fmt.Sprint(l.PartStart) // a split period's lines bill a meter once per part
			switch by, seen := byValue[l.Meter]; {
			case err != nil:
				msgs = append(msgs, fmt.Sprintf("line %d: %v", l.LineNo, err))
			case ownLine[l.Meter+"\x00"+l.Dimensions+"\x00"+fmt.Sprint(l.PartStart)]:
				msgs = append(msgs, fmt.Sprintf("line %d bills meter %q%s for %s a second time", l.LineNo, l.Meter, labelled(l.Dimensions), inv.Period))
			case ownPart[part] && (!seen || by != name):
				msgs = append(msgs, fmt.Sprintf("line %d bills meter %q%s for %s beside a line of the meter by another dimension", l.LineNo, l.Meter, labelled(l.Dimensions), inv.Period))
			}
			own[l.Meter], ownPart[part], ownLine[l.Meter+"\x00"+l.Dimensions+"\x00"+fmt.Sprint(l.PartStart)] = true, true, true
			if name != "" {
				byValue[l.Meter] = name
			}
		}
	}
	if lateOnly(inv) {
		// An invoice of late usage in another currency: the period's own
		// rows are on the customer's invoice of the period (coverage).
		return msgs, nil
	}
	f := schema.LedgerFilter{Customer: inv.Customer, From: inv.PeriodStart, To: inv.PeriodEnd, ThroughID: inv.LedgerHead}
	meters, err := db.LedgerMeters(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("read meters of invoice %d: %w", inv.ID, err)
	}
	for _, m := range meters {
		if !own[m] {
			msgs = append(msgs, fmt.Sprintf("meter %q has rows in %s up to id %d but no line: they were left off the invoice", m, inv.Period, inv.LedgerHead))
		}
	}
	// A meter billed per dimension value has a line for every value that
	// has rows: a value's line removed would leave its rows unbilled.
	for _, m := range slices.Sorted(maps.Keys(byValue)) {
		by := byValue[m]
		missing := map[string]bool{}
		mf := f
		mf.Meter = m
		err := db.ScanLedger(ctx, mf, func(rec *schema.LedgerRow) error {
			if dims := dimensionsOf(by, ledger.DimensionValue(rec.Properties, by)); !ownLine[m+"\x00"+dims+"\x00"+fmt.Sprint(inv.partStartOf(rec.OccurredAt))] {
				missing[dims] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read rows of invoice %d: %w", inv.ID, err)
		}
		for _, dims := range slices.Sorted(maps.Keys(missing)) {
			msgs = append(msgs, fmt.Sprintf("meter %q has rows with %s in %s up to id %d but no line: they were left off the invoice", m, DimensionLabel(dims), inv.Period, inv.LedgerHead))
		}
	}
	return msgs, nil
}

// meterLabel is a line's meter as verify names it: "tokens model=gpt-4o"
// for a line of one dimension value.
func meterLabel(l InvoiceLine) string {
	if l.Dimensions == "" {
		return l.Meter
	}
	return l.Meter + " " + DimensionLabel(l.Dimensions)
}

// labelled is " (model=gpt-4o)" for a line of one dimension value, "" else.
func labelled(dims string) string {
	if dims == "" {
		return ""
	}
	return " (" + DimensionLabel(dims) + ")"
}
