package invoice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

var invMeters = ledger.NewMeters([]ledger.Meter{
	{Name: "api", Aggregation: ledger.AggSum, Unit: "requests"},
	{Name: "seats", Aggregation: ledger.AggMax, Unit: "seats"},
})

func month(t *testing.T, label, tz string) ledger.Period {
	t.Helper()
	p, err := ledger.MonthPeriod(label, mustZone(t, tz))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) closePeriod(t *testing.T, req invoice.CloseRequest) *invoice.CloseResult {
	t.Helper()
	res, err := invoice.Close(e.Ctx, e.DB, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func at(s string) func() time.Time { return func() time.Time { return ts(s) } }

// lineMap indexes an invoice's lines by meter and period ("api 2026-10", late marked with *).
func lineMap(inv invoice.Invoice) map[string]invoice.InvoiceLine {
	m := map[string]invoice.InvoiceLine{}
	for _, l := range inv.Lines {
		k := l.Meter + " " + l.Period
		if l.Late {
			k += "*"
		}
		m[k] = l
	}
	return m
}

func byCustomer(invs []invoice.Invoice) map[string]invoice.Invoice {
	m := map[string]invoice.Invoice{}
	for _, inv := range invs {
		m[inv.Customer] = inv
	}
	return m
}

func wantLines(t *testing.T, inv invoice.Invoice, want map[string]string) {
	t.Helper()
	got := lineMap(inv)
	if len(got) != len(want) {
		t.Fatalf("invoice %d (%s): lines %v, want %v", inv.ID, inv.Customer, got, want)
	}
	for k, v := range want {
		if l, ok := got[k]; !ok || l.Quantity.String() != v {
			t.Fatalf("invoice %d (%s) line %q: got %+v, want %s", inv.ID, inv.Customer, k, got[k], v)
		}
	}
}

func TestInvoiceKeepsTotalsAfterLateUsage(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	oct := month(t, "2026-10", "UTC")
	e.SetClock(ts("2026-10-31T12:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("10"), At: ts("2026-10-02T00:00:00Z")},
		row{Customer: "c1", Meter: "api", Qty: q("5"), At: ts("2026-10-31T23:59:59.999Z")},
		row{Customer: "c1", Meter: "seats", Qty: q("3"), At: ts("2026-10-03T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("7"), At: ts("2026-10-04T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("1"), At: ts("2026-11-01T00:00:00Z")}, // November: not on October's invoice
	)
	first := e.closePeriod(t, invoice.CloseRequest{Period: oct, All: true, Grace: time.Hour, Meters: invMeters, Now: at("2026-11-01T02:00:00Z")})
	if first.Existing || len(first.Invoices) != 2 || first.Head != 5 {
		t.Fatalf("first close: %+v", first)
	}
	invs := byCustomer(first.Invoices)
	wantLines(t, invs["c1"], map[string]string{"api 2026-10": "15", "seats 2026-10": "3"})
	wantLines(t, invs["c2"], map[string]string{"api 2026-10": "7"})
	if l := lineMap(invs["c1"])["api 2026-10"]; l.Rows != 2 || l.MaxID != 2 || l.ThroughID != 5 || len(l.Digest) != 32 {
		t.Fatalf("c1 api line: %+v", l)
	}
	if first.Cutoff != ts("2026-11-01T02:00:00Z").UnixMilli() {
		t.Fatalf("cutoff = %d", first.Cutoff)
	}

	// Late usage for October, recorded after the close.
	e.SetClock(ts("2026-11-02T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("4"), At: ts("2026-10-20T00:00:00Z")},
		row{Customer: "c1", Meter: "seats", Qty: q("8"), At: ts("2026-10-21T00:00:00Z")}, // max 3 -> 8
		row{Customer: "c3", Meter: "api", Qty: q("2"), At: ts("2026-10-05T00:00:00Z")},   // no October invoice, but October is closed
		row{Customer: "c1", Meter: "api", Qty: q("100"), At: ts("2026-11-10T00:00:00Z")},
	)

	// The closed invoice is unchanged, in the database and on re-close.
	stored, err := invoice.GetInvoice(e.Ctx, e.DB, invs["c1"].ID)
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, *stored, map[string]string{"api 2026-10": "15", "seats 2026-10": "3"})
	if !bytes.Equal(stored.Digest, invs["c1"].Digest) {
		t.Fatal("stored digest differs from the one returned at close")
	}
	again := e.closePeriod(t, invoice.CloseRequest{Period: oct, All: true, Grace: time.Hour, Meters: invMeters, Now: at("2026-11-03T00:00:00Z")})
	if !again.Existing || len(again.Invoices) != 2 || again.Cutoff != first.Cutoff || again.Head != first.Head {
		t.Fatalf("re-close: %+v", again)
	}
	for _, inv := range again.Invoices {
		if !bytes.Equal(inv.Digest, invs[inv.Customer].Digest) || inv.ID != invs[inv.Customer].ID {
			t.Fatalf("re-close returned a different invoice for %s", inv.Customer)
		}
	}
	// Re-closing for one customer also returns the invoice frozen for all.
	one := e.closePeriod(t, invoice.CloseRequest{Period: oct, Customer: "c1", Grace: time.Hour, Meters: invMeters, Now: at("2026-11-03T00:00:00Z")})
	if !one.Existing || len(one.Invoices) != 1 || one.Invoices[0].ID != invs["c1"].ID {
		t.Fatalf("re-close c1: %+v", one)
	}

	// The usage query with the invoice's cutoff reproduces the invoice.
	rep, err := ledger.Query(e.Ctx, e.DB, ledger.UsageQuery{From: oct.Start, To: oct.End, Customer: "c1", Meters: invMeters, AsOf: time.UnixMilli(first.Cutoff)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Lines) != 2 || !rep.Lines[0].Quantity.Equal(q("15")) || !rep.Lines[1].Quantity.Equal(q("3")) {
		t.Fatalf("as-of cutoff: %+v", rep.Lines)
	}

	late, err := invoice.LateUsage(e.Ctx, e.DB, "", invMeters)
	if err != nil {
		t.Fatal(err)
	}
	gotLate := map[string]string{}
	for _, l := range late {
		if l.Period != "2026-10" {
			t.Fatalf("late line names period %q", l.Period)
		}
		gotLate[l.Customer+" "+l.Meter] = l.Quantity.String()
	}
	if len(gotLate) != 3 || gotLate["c1 api"] != "4" || gotLate["c1 seats"] != "5" || gotLate["c3 api"] != "2" {
		t.Fatalf("late usage: %v", gotLate)
	}

	nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Grace: time.Hour, Meters: invMeters, Now: at("2026-12-01T01:00:00Z")})
	ninvs := byCustomer(nov.Invoices)
	wantLines(t, ninvs["c1"], map[string]string{"api 2026-11": "100", "api 2026-10*": "4", "seats 2026-10*": "5"})
	wantLines(t, ninvs["c2"], map[string]string{"api 2026-11": "1"})
	wantLines(t, ninvs["c3"], map[string]string{"api 2026-10*": "2"})
	if l := lineMap(ninvs["c1"])["api 2026-10*"]; l.AfterID != 5 || l.Rows != 1 || l.PeriodStart != oct.Start.UnixMilli() {
		t.Fatalf("late line: %+v", l)
	}
	if late, err := invoice.LateUsage(e.Ctx, e.DB, "", invMeters); err != nil {
		t.Fatalf("late usage after billing it: %v", err)
	} else if len(late) != 0 {
		t.Fatalf("late usage after billing it: %+v", late)
	}

	// More late usage for October after November's close goes to the next invoice.
	e.SetClock(ts("2026-12-02T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-10-09T00:00:00Z")})
	late, err = invoice.LateUsage(e.Ctx, e.DB, "c1", invMeters)
	if err != nil {
		t.Fatalf("late after second close: %v", err)
	}
	if len(late) != 1 || !late[0].Quantity.Equal(q("1")) || late[0].AfterID != nov.Head {
		t.Fatalf("late after second close: %+v", late)
	}

	rep2, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep2.First(); p != nil {
		t.Fatalf("verify: %v", p)
	}
}

func TestCloseRefusedBeforePeriodEndPlusGrace(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.Write(row{Customer: "c", Meter: "api", Qty: q("1"), At: ts("2026-10-02T00:00:00Z")})
	_, err := invoice.Close(e.Ctx, e.DB, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Grace: time.Hour, Now: at("2026-11-01T00:59:59Z")})
	if !errors.Is(err, invoice.ErrTooEarly) {
		t.Fatalf("err = %v, want ErrTooEarly", err)
	}
	var n int
	if err := e.DB.Read.Get(&n, `SELECT (SELECT COUNT(*) FROM period_closes) + (SELECT COUNT(*) FROM invoices)`); err != nil || n != 0 {
		t.Fatalf("refused close wrote %d rows (%v)", n, err)
	}
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Grace: time.Hour, Now: at("2026-11-01T01:00:00Z")})
}

func TestCloseRefusesOverlappingPeriods(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.Write(row{Customer: "c", Meter: "api", Qty: q("1"), At: ts("2026-10-02T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Now: at("2026-11-05T00:00:00Z")})
	_, err := invoice.Close(e.Ctx, e.DB, invoice.CloseRequest{Period: month(t, "2026-10", "Europe/Berlin"), Customer: "c", Now: at("2026-11-05T00:00:00Z")})
	if !errors.Is(err, invoice.ErrPeriodOverlap) {
		t.Fatalf("err = %v, want ErrPeriodOverlap", err)
	}
	if _, err := invoice.Close(e.Ctx, e.DB, invoice.CloseRequest{Period: month(t, "2026-10", "UTC")}); err == nil {
		t.Fatal("close with neither a customer nor all succeeded")
	}
}

func TestCloseOneCustomerThenAll(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	oct := month(t, "2026-10", "Europe/Berlin")
	e.SetClock(ts("2026-10-30T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("2"), At: ts("2026-10-10T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("3"), At: ts("2026-10-10T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("50"), At: ts("2026-10-31T23:30:00Z")}, // 00:30 on 1 Nov in Berlin
	)
	r1 := e.closePeriod(t, invoice.CloseRequest{Period: oct, Customer: "c1", Meters: invMeters, Now: at("2026-11-02T00:00:00Z")})
	if len(r1.Invoices) != 1 || r1.Invoices[0].Customer != "c1" {
		t.Fatalf("close c1: %+v", r1)
	}
	e.SetClock(ts("2026-11-02T01:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("9"), At: ts("2026-10-11T00:00:00Z")}) // late for c1
	r2 := e.closePeriod(t, invoice.CloseRequest{Period: oct, All: true, Meters: invMeters, Now: at("2026-11-03T00:00:00Z")})
	if len(r2.Invoices) != 1 || r2.Invoices[0].Customer != "c2" {
		t.Fatalf("close all after c1: %+v", r2.Invoices)
	}
	wantLines(t, r2.Invoices[0], map[string]string{"api 2026-10": "3"})
	late, err := invoice.LateUsage(e.Ctx, e.DB, "", invMeters)
	if err != nil || len(late) != 1 || late[0].Customer != "c1" || !late[0].Quantity.Equal(q("9")) {
		t.Fatalf("late: %+v %v", late, err)
	}
}

func TestCloseDryRunChangesNothing(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.Write(row{Customer: "c", Meter: "api", Qty: q("1"), At: ts("2026-10-02T00:00:00Z")})
	res := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, DryRun: true, Now: at("2026-11-05T00:00:00Z")})
	if len(res.Invoices) != 1 || !res.Invoices[0].Lines[0].Quantity.Equal(q("1")) {
		t.Fatalf("dry run: %+v", res)
	}
	invs, err := invoice.ListInvoices(context.Background(), e.DB, invoice.InvoiceFilter{})
	if err != nil || len(invs) != 0 {
		t.Fatalf("dry run stored %d invoices (%v)", len(invs), err)
	}
	wantCounts(t, e, "after the dry run", 0, 0, 0)

	// The dry run left the period open: a real close freezes the same invoice.
	closed := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Now: at("2026-11-05T00:00:00Z")})
	if closed.Existing || len(closed.Invoices) != 1 || closed.Invoices[0].Customer != "c" || closed.Head != 1 {
		t.Fatalf("close after the dry run: %+v", closed)
	}
	wantLines(t, closed.Invoices[0], map[string]string{"api 2026-10": "1"})
	if !bytes.Equal(closed.Invoices[0].Digest, res.Invoices[0].Digest) {
		t.Fatal("close after the dry run froze a different invoice than the dry run showed")
	}
	wantCounts(t, e, "after the real close", 1, 1, 1)
}

// wantCounts checks how many rows period_closes, invoices and invoice_lines hold.
func wantCounts(t *testing.T, e *env, when string, closes, invoices, lines int) {
	t.Helper()
	var got struct{ Closes, Invoices, Lines int }
	if err := e.DB.Read.QueryRow(`SELECT (SELECT COUNT(*) FROM period_closes), (SELECT COUNT(*) FROM invoices), (SELECT COUNT(*) FROM invoice_lines)`).
		Scan(&got.Closes, &got.Invoices, &got.Lines); err != nil {
		t.Fatal(err)
	}
	if got.Closes != closes || got.Invoices != invoices || got.Lines != lines {
		t.Fatalf("%s: period_closes, invoices, invoice_lines hold %d, %d, %d rows, want %d, %d, %d",
			when, got.Closes, got.Invoices, got.Lines, closes, invoices, lines)
	}
}

func TestClosedInvoiceCannotBeEdited(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.Write(row{Customer: "c", Meter: "api", Qty: q("1"), At: ts("2026-10-02T00:00:00Z")})
	res := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Now: at("2026-11-05T00:00:00Z")})
	if len(res.Invoices) != 1 {
		t.Fatalf("close: %+v", res)
	}
	before, err := invoice.GetInvoice(e.Ctx, e.DB, res.Invoices[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	// The message of the trigger (schema/migrations/0002_invoices.sql) that
	// must stop each statement: a foreign key error would not prove it fires.
	const closedPeriod, closedInvoice = "closed periods never change", "a closed invoice never changes: add an adjustment instead"
	raises := map[string]string{
		`UPDATE invoice_lines SET quantity = 0`: closedInvoice, // invoice_lines_no_update
		`DELETE FROM invoice_lines`:             closedInvoice, // invoice_lines_no_delete
		`UPDATE invoices SET cutoff = 0`:        closedInvoice, // invoices_no_update
		`DELETE FROM invoices`:                  closedInvoice, // invoices_no_delete
		`DELETE FROM period_closes`:             closedPeriod,  // period_closes_no_delete
		`UPDATE period_closes SET cutoff = 0`:   closedPeriod,  // period_closes_no_update
	}
	for _, stmt := range []string{
		`UPDATE invoice_lines SET quantity = 0`,
		`DELETE FROM invoice_lines`,
		`UPDATE invoices SET cutoff = 0`,
		`DELETE FROM invoices`,
		`DELETE FROM period_closes`,
		`UPDATE period_closes SET cutoff = 0`,
	} {
		if _, err := e.DB.Write.Exec(stmt); err == nil {
			t.Errorf("%s succeeded", stmt)
		} else if !strings.Contains(err.Error(), raises[stmt]) {
			t.Errorf("%s: %v, want the trigger's %q", stmt, err, raises[stmt])
		}
	}
	after, err := invoice.GetInvoice(e.Ctx, e.DB, before.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after.Digest, before.Digest) || len(after.Lines) != len(before.Lines) {
		t.Fatalf("invoice changed: digest %x, %d lines; before %x, %d lines", after.Digest, len(after.Lines), before.Digest, len(before.Lines))
	}
	for i := range after.Lines {
		if !after.Lines[i].Quantity.Equal(before.Lines[i].Quantity) {
			t.Fatalf("line %d quantity %s, before %s", i+1, after.Lines[i].Quantity, before.Lines[i].Quantity)
		}
	}
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("invoice changed:\n%+v\nbefore\n%+v", after, before)
	}
	wantCounts(t, e, "after the edits", 1, 1, 1)
	if _, err := invoice.GetInvoice(e.Ctx, e.DB, 99); !errors.Is(err, invoice.ErrNoInvoice) {
		t.Fatalf("missing invoice: %v", err)
	}
}

// A close for all customers reads its period as one id range when the
// period's rows are (nearly) contiguous, else through the event-time index;
// both must freeze the same invoices.
func TestCloseRangeAndIndexScansAgree(t *testing.T) {
	defer invoice.SetRangeScan(true)
	for _, interleave := range []int{1, 2, 5} { // 1, 2: one id range (2 with other months inside); 5: too sparse, index
		e := newEnv(t)
		var rows []row
		for i := 0; i < 3000; i++ {
			at := ts("2026-10-01T00:00:00Z").Add(time.Duration(i) * 13 * time.Minute)
			if i%interleave != 0 {
				at = ts("2026-08-01T00:00:00Z").Add(time.Duration(i) * time.Minute) // another month in between
			}
			r := row{Customer: fmt.Sprintf("c%d", i%7), Meter: []string{"api", "seats"}[i%2], Qty: ledger.TotalOf(ledger.Quantity(i%97) * ledger.Scale), At: at}
			if i%50 == 0 {
				r.Adjust, r.Qty = true, q("-1")
			}
			rows = append(rows, r)
		}
		e.Write(rows...)
		req := invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters, DryRun: true, Now: at("2026-12-01T00:00:00Z")}
		invoice.SetRangeScan(true)
		ranged := e.closePeriod(t, req)
		invoice.SetRangeScan(false)
		indexed := e.closePeriod(t, req)

		// The close's id-range probe picks the path this interleave is for:
		// one id range for 1 and 2 (with other months' rows inside it for 2),
		// the event-time index for 5.
		lo, hi, byRange, err := invoice.PeriodRange(e.Ctx, e.DB, req, ranged.Head)
		if err != nil {
			t.Fatal(err)
		}
		if want := interleave != 5; byRange != want {
			t.Fatalf("interleave %d: close reads ids %d..%d as one range: %v, want %v", interleave, lo, hi, byRange, want)
		}
		var inPeriod int64
		if err := e.DB.Read.Get(&inPeriod, `SELECT COUNT(*) FROM metered_usage WHERE occurred_at >= ? AND occurred_at < ? AND id <= ?`,
			req.Period.Start.UnixMilli(), req.Period.End.UnixMilli(), ranged.Head); err != nil {
			t.Fatal(err)
		}
		if span := hi - lo + 1; (span == inPeriod) != (interleave == 1) {
			t.Fatalf("interleave %d: ids %d..%d hold the period's %d rows", interleave, lo, hi, inPeriod)
		}

		// The invoices' lines add up to the usage query's lines for the period.
		rep, err := ledger.Query(e.Ctx, e.DB, ledger.UsageQuery{From: req.Period.Start, To: req.Period.End, Meters: invMeters, AsOfID: ranged.Head})
		if err != nil {
			t.Fatal(err)
		}
		queried := map[string]ledger.Total{}
		var queryTotal, invoiceTotal ledger.Total
		for _, l := range rep.Lines {
			queried[l.Customer+" "+l.Meter] = l.Quantity
			queryTotal = queryTotal.Plus(l.Quantity)
		}
		var nLines int
		for _, inv := range ranged.Invoices {
			for _, l := range inv.Lines {
				nLines++
				invoiceTotal = invoiceTotal.Plus(l.Quantity)
				if want, ok := queried[l.Customer+" "+l.Meter]; !ok || !want.Equal(l.Quantity) || l.Late {
					t.Fatalf("interleave %d: invoice line %+v, query says %s", interleave, l, want)
				}
			}
		}
		if !invoiceTotal.Equal(queryTotal) || nLines != len(rep.Lines) || queryTotal.Sign() == 0 {
			t.Fatalf("interleave %d: invoice lines (%d) add up to %s, the query's (%d) to %s", interleave, nLines, invoiceTotal, len(rep.Lines), queryTotal)
		}
		if len(ranged.Invoices) != 7 || len(ranged.Invoices) != len(indexed.Invoices) {
			t.Fatalf("interleave %d: %d vs %d invoices", interleave, len(ranged.Invoices), len(indexed.Invoices))
		}
		for i := range ranged.Invoices {
			if !bytes.Equal(ranged.Invoices[i].Digest, indexed.Invoices[i].Digest) {
				t.Fatalf("interleave %d: invoice %s differs:\n%+v\n%+v", interleave, ranged.Invoices[i].Customer, ranged.Invoices[i], indexed.Invoices[i])
			}
		}
		e.Close()
	}
}
