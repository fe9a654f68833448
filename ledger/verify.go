package ledger

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

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
}

// OK reports whether the check found nothing wrong.
func (c CheckResult) OK() bool { return len(c.Problems) == 0 }

// VerifyReport is every check's result, in the order they ran.
type VerifyReport struct {
	Checks []CheckResult `json:"checks"`
}

// First returns the first problem found, or nil if everything verified.
func (r *VerifyReport) First() *Problem {
	for _, c := range r.Checks {
		if len(c.Problems) > 0 {
			return &c.Problems[0]
		}
	}
	return nil
}

// maxProblems bounds each check's list: the first one is what matters, a few
// more show whether the damage is local.
const maxProblems = 20

// Verify checks, in order: SQLite's integrity_check; the hash chain over
// every ledger row; that every applied receipt has usage rows and every usage
// row an applied receipt; every closed invoice's digests and numbers against
// the ledger; the receipts' hash chain, both chains' ends against the chain
// head, every stored body against its body_sha256 and every replayed
// receipt's status against its replays (verify_custody.go); and that each
// anchor's row still exists with the anchored hash. The error is for failures
// to read, not for findings.
func Verify(ctx context.Context, db sqlx.QueryerContext, anchors ...Anchor) (*VerifyReport, error) {
	r := &VerifyReport{}
	for _, check := range []func(context.Context, sqlx.QueryerContext) (CheckResult, error){
		verifyIntegrity, verifyChain, verifyReceipts, verifyInvoices,
		verifyReceiptChain, verifyHead, verifyBodies, verifyStatuses,
		func(ctx context.Context, db sqlx.QueryerContext) (CheckResult, error) {
			return verifyAnchors(ctx, db, anchors)
		},
	} {
		c, err := check(ctx, db)
		if err != nil {
			return r, fmt.Errorf("verify %s: %w", c.Name, err)
		}
		r.Checks = append(r.Checks, c)
	}
	return r, nil
}

func (c *CheckResult) add(p Problem) {
	if len(c.Problems) < maxProblems {
		p.Check = c.Name
		c.Problems = append(c.Problems, p)
	}
}

func verifyIntegrity(ctx context.Context, db sqlx.QueryerContext) (CheckResult, error) {
	c := CheckResult{Name: "integrity_check"}
	var msgs []string
	if err := sqlx.SelectContext(ctx, db, &msgs, `PRAGMA integrity_check`); err != nil {
		return c, err
	}
	c.Checked = 1
	if len(msgs) == 1 && msgs[0] == "ok" {
		return c, nil
	}
	for _, m := range msgs {
		c.add(Problem{Table: "database", Msg: "integrity_check: " + m})
	}
	return c, nil
}

// verifyChain recomputes every row hash from the row's contents and the
// previous row's hash. An edited row fails its own hash; a deleted or
// inserted row breaks the link to the next one.
func verifyChain(ctx context.Context, db sqlx.QueryerContext) (CheckResult, error) {
	c := CheckResult{Name: "hash chain"}
	rows, err := db.QueryContext(ctx, `SELECT id, kind, provider, event_id, customer_id, meter, quantity, properties, reason, ref,
		occurred_at, recorded_at, prev_hash, row_hash FROM metered_usage ORDER BY id`)
	if err != nil {
		return c, err
	}
	defer rows.Close()
	prevID, prev := int64(0), GenesisHash
	var r Row
	var qty int64
	for rows.Next() {
		if err := rows.Scan(&r.ID, &r.Kind, &r.Provider, &r.EventID, &r.Customer, &r.Meter, &qty, &r.Properties, &r.Reason, &r.Ref,
			&r.OccurredAt, &r.RecordedAt, &r.PrevHash, &r.RowHash); err != nil {
			return c, err
		}
		r.Quantity = Quantity(qty)
		c.Checked++
		switch {
		case r.ID != prevID+1:
			c.add(Problem{Table: "metered_usage", ID: r.ID, Msg: fmt.Sprintf("ids jump from %d to %d: rows were deleted", prevID, r.ID)})
		case !bytes.Equal(r.PrevHash, prev):
			c.add(Problem{Table: "metered_usage", ID: r.ID, Msg: fmt.Sprintf("prev_hash does not match row %d's row_hash: the chain was rewritten", prevID)})
		}
		if !bytes.Equal(r.Hash(r.PrevHash), r.RowHash) {
			c.add(Problem{Table: "metered_usage", ID: r.ID, Msg: fmt.Sprintf("row_hash does not match the row's contents (customer %q, meter %q, quantity %s): the row was changed after it was written",
				r.Customer, r.Meter, r.Quantity)})
		}
		// Continue from the stored hash, so one edit is reported once and
		// any further damage is reported separately.
		prevID, prev = r.ID, append(prev[:0:0], r.RowHash...)
	}
	return c, rows.Err()
}

// verifyReceipts checks custody against the ledger: an applied receipt
// without usage rows lost its effect; a usage row without an applied receipt
// has no authenticated event behind it.
func verifyReceipts(ctx context.Context, db sqlx.QueryerContext) (CheckResult, error) {
	c := CheckResult{Name: "receipts and usage rows"}
	if err := db.QueryRowxContext(ctx, `SELECT COUNT(*) FROM receipts WHERE status = 'applied'`).Scan(&c.Checked); err != nil {
		return c, err
	}
	var orphanReceipts []struct {
		ID       int64  `db:"id"`
		Provider string `db:"provider"`
		EventID  string `db:"event_id"`
	}
	if err := sqlx.SelectContext(ctx, db, &orphanReceipts, `SELECT r.id, r.provider, r.event_id FROM receipts r
		WHERE r.status = 'applied' AND NOT EXISTS (
			SELECT 1 FROM metered_usage u WHERE u.provider = r.provider AND u.event_id = r.event_id AND u.kind = 'usage')
		ORDER BY r.id LIMIT ?`, maxProblems); err != nil {
		return c, err
	}
	for _, o := range orphanReceipts {
		c.add(Problem{Table: "receipts", ID: o.ID, Msg: fmt.Sprintf("applied receipt %s/%s has no usage rows", o.Provider, o.EventID)})
	}
	var orphanRows []struct {
		ID       int64  `db:"id"`
		Provider string `db:"provider"`
		EventID  string `db:"event_id"`
	}
	// Retention (retention.keys) deletes old receipts on purpose, and each
	// such prune records the ledger head it left behind: a row at or below it
	// may lack its receipt entirely. A row above it, or one whose receipt
	// exists but is not applied, is still a problem.
	if err := sqlx.SelectContext(ctx, db, &orphanRows, `SELECT u.id, u.provider, u.event_id FROM metered_usage u
		WHERE u.kind = 'usage' AND NOT EXISTS (
			SELECT 1 FROM receipts r WHERE r.provider = u.provider AND r.event_id = u.event_id AND r.status = 'applied')
		AND NOT (u.id <= (SELECT COALESCE(MAX(ledger_head_id), 0) FROM prune_runs WHERE keys_deleted > 0)
			AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.provider = u.provider AND r.event_id = u.event_id))
		ORDER BY u.id LIMIT ?`, maxProblems); err != nil {
		return c, err
	}
	for _, o := range orphanRows {
		c.add(Problem{Table: "metered_usage", ID: o.ID, Msg: fmt.Sprintf("usage row has no applied receipt for %s/%s", o.Provider, o.EventID)})
	}
	return c, nil
}

// verifyInvoices recomputes every closed invoice: its digest over its stored
// fields, and each line's rows, digest and quantity from the ledger.
func verifyInvoices(ctx context.Context, db sqlx.QueryerContext) (CheckResult, error) {
	c := CheckResult{Name: "invoices"}
	invs, err := listInvoices(ctx, db, InvoiceFilter{}, true)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return c, nil // a database from before invoices existed
		}
		return c, err
	}
	for i := range invs {
		inv := &invs[i]
		if d := invoiceDigest(inv); !bytes.Equal(d, inv.Digest) {
			c.add(Problem{Table: "invoices", ID: inv.ID, Msg: "stored digest does not match the invoice's fields and lines: the invoice was changed after it was closed"})
		}
		msgs, err := checkInvoiceLines(ctx, db, inv)
		if err != nil {
			return c, err
		}
		for _, msg := range msgs {
			c.add(Problem{Table: "invoices", ID: inv.ID, Msg: msg})
		}
		for _, l := range inv.Lines {
			c.Checked++
			if msg, err := checkLine(ctx, db, l); err != nil {
				return c, err
			} else if msg != "" {
				c.add(Problem{Table: "invoices", ID: inv.ID, Msg: fmt.Sprintf("line %d (%s %s): %s", l.LineNo, l.Meter, l.Period, msg)})
			}
		}
	}
	return c, nil
}

// checkInvoiceLines checks that an invoice holds the lines its close wrote:
// every line is the invoice's customer's and reaches the invoice's ledger
// head; the period's own lines cover every row from the first, one line per
// meter that has rows in the period up to the head. checkLine proves each
// line matches the rows it names; this proves the lines name the rows they
// should, so rows cannot be left off an invoice by editing its lines and
// recomputing the (unkeyed) digests.
func checkInvoiceLines(ctx context.Context, db sqlx.QueryerContext, inv *Invoice) ([]string, error) {
	var msgs []string
	own := map[string]bool{}
	for i, l := range inv.Lines {
		switch {
		case l.LineNo != int64(i+1):
			msgs = append(msgs, fmt.Sprintf("line %d is line number %d: lines were removed or renumbered", i+1, l.LineNo))
		case l.Customer != inv.Customer:
			msgs = append(msgs, fmt.Sprintf("line %d bills customer %q on customer %q's invoice", l.LineNo, l.Customer, inv.Customer))
		case l.ThroughID != inv.LedgerHead:
			msgs = append(msgs, fmt.Sprintf("line %d covers rows up to id %d, the invoice's ledger head is %d", l.LineNo, l.ThroughID, inv.LedgerHead))
		case l.Late && l.PeriodEnd > inv.PeriodStart:
			msgs = append(msgs, fmt.Sprintf("late line %d bills %s, which does not end before the invoice's period %s", l.LineNo, l.Period, inv.Period))
		case !l.Late && (l.PeriodStart != inv.PeriodStart || l.PeriodEnd != inv.PeriodEnd || l.AfterID != 0):
			msgs = append(msgs, fmt.Sprintf("line %d covers %s after id %d, not all of the invoice's period %s", l.LineNo, l.Period, l.AfterID, inv.Period))
		}
		if !l.Late {
			if own[l.Meter] {
				msgs = append(msgs, fmt.Sprintf("line %d bills meter %q for %s a second time", l.LineNo, l.Meter, inv.Period))
			}
			own[l.Meter] = true
		}
	}
	f := rowFilter{customer: inv.Customer, from: inv.PeriodStart, to: inv.PeriodEnd, throughID: inv.LedgerHead}
	from, args := f.where()
	var meters []string
	if err := sqlx.SelectContext(ctx, db, &meters, `SELECT DISTINCT meter`+from+` ORDER BY meter`, args...); err != nil {
		return nil, fmt.Errorf("read meters of invoice %d: %w", inv.ID, err)
	}
	for _, m := range meters {
		if !own[m] {
			msgs = append(msgs, fmt.Sprintf("meter %q has rows in %s up to id %d but no line: they were left off the invoice", m, inv.Period, inv.LedgerHead))
		}
	}
	return msgs, nil
}

func checkLine(ctx context.Context, db sqlx.QueryerContext, l InvoiceLine) (string, error) {
	m := Meter{Name: l.Meter, Aggregation: l.Aggregation, Property: l.Property, Unit: l.Unit}
	got := newAggregate(m.spec())
	var rows []covered
	f := rowFilter{customer: l.Customer, meter: l.Meter, from: l.PeriodStart, to: l.PeriodEnd, afterID: l.AfterID, throughID: l.ThroughID}
	from, args := f.where()
	rs, err := db.QueryContext(ctx, `SELECT id, kind, provider, event_id, customer_id, meter, quantity, properties, reason, ref,
		occurred_at, recorded_at, prev_hash`+from+` ORDER BY id`, args...)
	if err != nil {
		return "", err
	}
	defer rs.Close()
	for rs.Next() {
		var r Row
		var qty int64
		if err := rs.Scan(&r.ID, &r.Kind, &r.Provider, &r.EventID, &r.Customer, &r.Meter, &qty, &r.Properties, &r.Reason, &r.Ref,
			&r.OccurredAt, &r.RecordedAt, &r.PrevHash); err != nil {
			return "", err
		}
		r.Quantity = Quantity(qty)
		got.add(r.Kind, r.ID, r.Quantity, r.OccurredAt, r.Properties)
		// The hash recomputed from the row as it is now, not the stored
		// one: an edit that left row_hash alone still changes the digest.
		rows = append(rows, covered{r.ID, r.Hash(r.PrevHash)})
	}
	if err := rs.Err(); err != nil {
		return "", err
	}
	la := lineAcc{agg: got, rows: rows}
	if got.rows != l.Rows || got.adjustments != l.Adjustments || la.maxID() != l.MaxID {
		return fmt.Sprintf("covers %d usage and %d adjustment rows up to id %d now, %d and %d up to id %d when closed: ledger rows were added or removed",
			got.rows, got.adjustments, la.maxID(), l.Rows, l.Adjustments, l.MaxID), nil
	}
	if !bytes.Equal(rowsDigest(rows), l.Digest) {
		return "digest of the covered rows differs: a covered ledger row was changed (see the hash chain check)", nil
	}
	exact, err := aggregateDelta(ctx, db, l.Customer, m, l.PeriodStart, l.PeriodEnd, l.AfterID, l.ThroughID)
	if err != nil {
		return "", err
	}
	q, err := exact.checked(l.Customer, l.Meter, l.Period)
	if err != nil {
		// What a version that wrapped sums froze: no stored value can be right.
		return fmt.Sprintf("quantity recomputes to %s, beyond the largest quantity; invoice says %s", exact, l.Quantity), nil
	}
	if q != l.Quantity {
		return fmt.Sprintf("quantity recomputes to %s, invoice says %s", q, l.Quantity), nil
	}
	return "", nil
}
