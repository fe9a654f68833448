package invoice_test

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

// The reproduction: July closed for all, late July usage, then May
// closed for c1 (a backfill). The late July usage stays pending: May's
// invoice bills only May, and August's invoice bills the late July line.
func TestCloseOfAnEarlierPeriodLeavesLaterLateUsagePending(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-07-10T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-07-10T00:00:00Z")},
		row{Customer: "c1", Meter: "api", Qty: q("3"), At: ts("2026-05-10T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-07", "UTC"), All: true, Meters: invMeters, Now: at("2026-08-02T00:00:00Z")})
	e.SetClock(ts("2026-08-03T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-07-11T00:00:00Z")})

	may := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-05", "UTC"), Customer: "c1", Meters: invMeters, Now: at("2026-08-04T00:00:00Z")})
	if len(may.Invoices) != 1 {
		t.Fatalf("May: %+v", may)
	}
	wantLines(t, may.Invoices[0], map[string]string{"api 2026-05": "3"})
	late, err := invoice.LateUsage(e.Ctx, e.DB, "c1", invMeters)
	if err != nil || len(late) != 1 || late[0].Period != "2026-07" || !late[0].Quantity.Equal(q("1")) {
		t.Fatalf("late July usage after May's close: %+v %v", late, err)
	}
	if rep := verified(t, e); rep.First() != nil || notes(rep) != "" {
		t.Fatalf("verify after May's close:\n%s%s", problems(rep), notes(rep))
	}

	aug := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-08", "UTC"), Customer: "c1", Meters: invMeters, Now: at("2026-09-02T00:00:00Z")})
	wantLines(t, aug.Invoices[0], map[string]string{"api 2026-07*": "1"})
	if rep := verified(t, e); rep.First() != nil || notes(rep) != "" {
		t.Fatalf("verify after August's close:\n%s%s", problems(rep), notes(rep))
	}
}

// A database already holding what the rule before allowed (May's invoice
// billing late July usage) verifies, with a note that explains it; the late
// rows are billed once, so the next close does not bill them again.
func TestVerifyExplainsALateLineClosedUnderThePreviousRule(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-07-10T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-07-10T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-07", "UTC"), All: true, Meters: invMeters, Now: at("2026-08-02T00:00:00Z")})
	e.SetClock(ts("2026-08-03T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-07-11T00:00:00Z")})
	req := invoice.CloseRequest{Period: month(t, "2026-05", "UTC"), Customer: "c1", Meters: invMeters, Now: at("2026-08-04T00:00:00Z")}
	may := e.closePeriod(t, req.PreRuleLate())
	wantLines(t, may.Invoices[0], map[string]string{"api 2026-07*": "1"})

	rep := verified(t, e)
	if p := rep.First(); p != nil {
		t.Fatalf("a late line closed under the previous rule fails verify:\n%s", problems(rep))
	}
	want := "invoice 2 (2026-05) line 1 bills late api usage of 2026-07, a later period, as closes did before late usage went only on invoices of later periods; its rows are billed once, totals are not doubled"
	if got := notes(rep); got != "invoices: "+want+"\n" {
		t.Fatalf("notes:\n%s\nwant:\ninvoices: %s", got, want)
	}
	// Billed once: nothing is pending, and August bills nothing of July.
	if late, err := invoice.LateUsage(e.Ctx, e.DB, "c1", invMeters); err != nil || len(late) != 0 {
		t.Fatalf("late usage: %+v %v", late, err)
	}
	aug := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-08", "UTC"), Customer: "c1", Meters: invMeters, Now: at("2026-09-02T00:00:00Z")})
	if len(aug.Invoices) != 0 {
		t.Fatalf("August: %+v", aug.Invoices)
	}
}

// Tampering with such a line is still reported: its quantity no longer
// recomputes, and the invoice's digest no longer matches.
func TestVerifyStillReportsATamperedPreRuleLateLine(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	dir := t.TempDir()
	e := newEnvAt(t, dir)
	defer e.Close()
	e.SetClock(ts("2026-07-10T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-07-10T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-07", "UTC"), All: true, Meters: invMeters, Now: at("2026-08-02T00:00:00Z")})
	e.SetClock(ts("2026-08-03T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-07-11T00:00:00Z")})
	req := invoice.CloseRequest{Period: month(t, "2026-05", "UTC"), Customer: "c1", Meters: invMeters, Now: at("2026-08-04T00:00:00Z")}
	e.closePeriod(t, req.PreRuleLate())
	tamper(t, dir, `DROP TRIGGER invoice_lines_no_update`, `UPDATE invoice_lines SET quantity = 5000000 WHERE invoice_id = 2`)
	got := problems(verified(t, e))
	for _, want := range []string{"invoices row 2: stored digest does not match", "invoices row 2: line 1 (api 2026-07): quantity recomputes to 1, invoice says 5"} {
		if !strings.Contains(got, want) {
			t.Fatalf("problems lack %q:\n%s", want, got)
		}
	}
}

// A late line that bills rows another line already billed is reported, even
// with every digest recomputed: the totals would be doubled.
func TestVerifyReportsRowsBilledTwice(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedForVerify(t) // October's invoice 1 bills rows 1 to 5
	defer e.Close()
	oct, nov := month(t, "2026-10", "UTC"), month(t, "2026-11", "UTC")
	forgeInvoice(t, e, dir, invoice.Invoice{ID: 2, CloseID: 2, Customer: "c1", Period: "2026-11", TZ: "UTC",
		PeriodStart: nov.Start.UnixMilli(), PeriodEnd: nov.End.UnixMilli(), Cutoff: ts("2026-12-02T00:00:00Z").UnixMilli(), LedgerHead: 5,
		ClosedAt: ts("2026-12-02T00:00:00Z").UnixMilli(),
		Lines: []invoice.InvoiceLine{{InvoiceID: 2, LineNo: 1, Customer: "c1", Meter: "api", Aggregation: ledger.AggSum, Unit: "requests", Late: true,
			Period: "2026-10", TZ: "UTC", PeriodStart: oct.Start.UnixMilli(), PeriodEnd: oct.End.UnixMilli(), AfterID: 3, ThroughID: 5,
			Quantity: q("4"), Rows: 2, MaxID: 5}}})
	want := "invoices row 2: line 1 (api 2026-10) bills ledger ids 4 to 5 again: invoice 1 line 1 billed them"
	if got := problems(verified(t, e)); got != "invoices: "+want+"\n" {
		t.Fatalf("problems:\n%s\nwant:\ninvoices: %s", got, want)
	}
}

func notes(rep *invoice.VerifyReport) string {
	var b strings.Builder
	for _, c := range rep.Checks {
		for _, n := range c.Notes {
			b.WriteString(c.Name + ": " + n + "\n")
		}
	}
	return b.String()
}

// Late lines that do not fit their invoice, stored directly (digests
// recomputed): only what a close under the previous rule wrote is explained;
// anything else is reported.
func TestVerifyExplainsOnlyWhatThePreviousRuleWrote(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	sep, oct, nov := month(t, "2026-09", "UTC"), month(t, "2026-10", "UTC"), month(t, "2026-11", "UTC")
	late := func(p ledger.Period, after, through int64, qty string, rows int64) invoice.InvoiceLine {
		return invoice.InvoiceLine{InvoiceID: 2, LineNo: 1, Customer: "c1", Meter: "api", Aggregation: ledger.AggSum, Unit: "requests", Late: true,
			Period: p.Label, TZ: "UTC", PeriodStart: p.Start.UnixMilli(), PeriodEnd: p.End.UnixMilli(), AfterID: after, ThroughID: through,
			Quantity: q(qty), Rows: rows, MaxID: through}
	}
	for _, c := range []struct {
		name    string
		line    invoice.InvoiceLine
		problem string // "" for a note
	}{
		{"October's late usage, as the previous rule billed it", late(oct, 5, 6, "3", 1), ""},
		{"October's usage its own invoice billed", late(oct, 3, 6, "7", 3),
			"line 1 (api 2026-10) bills ledger ids 4 to 5 again: invoice 1 line 1 billed them"},
		{"usage of November, which was never closed", late(nov, 6, 7, "4", 1),
			"late line 1 bills 2026-11, which does not end before the invoice's period 2026-09 starts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, dir := seedForVerify(t) // October's invoice 1 bills rows 1 to 5
			defer e.Close()
			e.SetClock(ts("2026-11-03T00:00:00Z"))
			e.Write(row{Customer: "c1", Meter: "api", Qty: q("3"), At: ts("2026-10-06T00:00:00Z")}) // row 6: late for October
			e.Write(row{Customer: "c1", Meter: "api", Qty: q("4"), At: ts("2026-11-06T00:00:00Z")}) // row 7: November
			forgeInvoice(t, e, dir, invoice.Invoice{ID: 2, CloseID: 2, Customer: "c1", Period: "2026-09", TZ: "UTC",
				PeriodStart: sep.Start.UnixMilli(), PeriodEnd: sep.End.UnixMilli(), Cutoff: ts("2026-11-04T00:00:00Z").UnixMilli(), LedgerHead: c.line.ThroughID,
				ClosedAt: ts("2026-11-04T00:00:00Z").UnixMilli(), Lines: []invoice.InvoiceLine{c.line}})
			rep := verified(t, e)
			got, gotNotes := problems(rep), notes(rep)
			if c.problem == "" {
				if got != "" || !strings.Contains(gotNotes, "invoice 2 (2026-09) line 1 bills late api usage of 2026-10, a later period") {
					t.Fatalf("problems:\n%snotes:\n%s", got, gotNotes)
				}
				return
			}
			if !strings.Contains(got, "invoices row 2: "+c.problem) || gotNotes != "" {
				t.Fatalf("problems:\n%snotes:\n%swant the problem %q", got, gotNotes, c.problem)
			}
		})
	}
}
