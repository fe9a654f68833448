package invoice_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// allowDelete lets a test delete what the triggers guard, in the backend's
// dialect, as someone with the database would.
func (e *env) allowDelete(tables ...string) {
	e.T.Helper()
	for _, t := range tables {
		if e.DB.Postgres() {
			e.Exec(`ALTER TABLE ` + t + ` DISABLE TRIGGER USER`)
		} else {
			e.Exec(`DROP TRIGGER IF EXISTS ` + t + `_no_delete`)
		}
	}
}

// sealedMonths writes usage of c1 and c2 in October and November, closes
// October for all, records a late October row of c2, and closes November:
// invoices 1 (c1, October), 2 (c2, October), 3 (c1, November) and 4 (c2,
// November, with the late line).
func sealedMonths(t *testing.T) *env {
	e := newEnv(t)
	t.Cleanup(e.Close)
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("2"), At: ts("2026-10-05T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("3"), At: ts("2026-10-06T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z")})
	e.SetClock(ts("2026-11-10T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-11-05T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("4"), At: ts("2026-11-05T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("5"), At: ts("2026-10-30T00:00:00Z")}) // late October
	res := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters, Now: at("2026-12-02T00:00:00Z")})
	if len(res.Invoices) != 2 || res.Invoices[1].ID != 4 || len(res.Invoices[1].Lines) != 2 || !res.Invoices[1].Lines[1].Late {
		t.Fatalf("November's invoices: %+v", res.Invoices)
	}
	if rep := verified(t, e); rep.First() != nil {
		t.Fatalf("intact database:\n%s", problems(rep))
	}
	return e
}

// A closed invoice deleted whole, with its lines, is found: its close's
// seal counted it, and its customer's usage of the period is on no invoice.
func TestVerifyReportsDeletedInvoice(t *testing.T) {
	e := sealedMonths(t)
	e.allowDelete("invoice_lines", "invoices")
	e.Exec(`DELETE FROM invoice_lines WHERE invoice_id = 2`)
	e.Exec(`DELETE FROM invoices WHERE id = 2`)
	got := problems(verified(t, e))
	for _, want := range []string{
		"close seals: period_closes row 1: close 1 (2026-10 in UTC for all customers) wrote 2 invoices, 1 are present (1)",
		`billing coverage: period_closes row 1: customer "c2" has usage in 2026-10 in UTC for all customers up to ledger id 2, but close 1 holds no invoice of theirs`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verify does not report %q:\n%s", want, got)
		}
	}
}

// The invoice that carried a late line deleted: the late row is pending
// again (a legitimate state), but the close that wrote the invoice counted it.
func TestVerifyReportsDeletedInvoiceWithLateLine(t *testing.T) {
	e := sealedMonths(t)
	e.allowDelete("invoice_lines", "invoices")
	e.Exec(`DELETE FROM invoice_lines WHERE invoice_id = 4`)
	e.Exec(`DELETE FROM invoices WHERE id = 4`)
	got := problems(verified(t, e))
	if !strings.Contains(got, "close 2 (2026-11 in UTC for all customers) wrote 2 invoices, 1 are present (3)") {
		t.Errorf("a deleted invoice with a late line is not reported:\n%s", got)
	}
}

// An invoice replaced by another with the same id and a recomputed digest
// (the lines' numbers changed and re-digested) no longer matches the seal.
func TestVerifyReportsInvoiceSwappedUnderItsSeal(t *testing.T) {
	e := sealedMonths(t)
	e.allowDelete("invoices")
	if e.DB.Postgres() {
		e.Exec(`ALTER TABLE invoices DISABLE TRIGGER USER`)
	} else {
		e.Exec(`DROP TRIGGER invoices_no_update`)
	}
	e.Exec(`UPDATE invoices SET digest = ? WHERE id = 3`, make([]byte, 32))
	got := problems(verified(t, e))
	if !strings.Contains(got, "close 2 (2026-11 in UTC for all customers): its invoices (3, 4) are not the ones it wrote") {
		t.Errorf("an invoice changed under its seal is not reported:\n%s", got)
	}
}

// Deleting the newest close with its seal and invoices breaks no link, but
// the closes' anchor taken before (`ledger head`) catches it.
func TestVerifyAnchorCatchesTruncatedCloses(t *testing.T) {
	e := sealedMonths(t)
	anchors, err := invoice.LoadAnchors(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if last := anchors[len(anchors)-2]; last.Chain != ledger.ChainCloses || last.ID != 2 {
		t.Fatalf("anchors %v: want the closes' end at close 2, before the credits'", anchors)
	}
	e.allowDelete("invoice_lines", "invoices", "close_seals", "period_closes")
	e.Exec(`DELETE FROM invoice_lines WHERE invoice_id IN (3, 4)`)
	e.Exec(`DELETE FROM invoices WHERE id IN (3, 4)`)
	e.Exec(`DELETE FROM close_seals WHERE close_id = 2`)
	e.Exec(`DELETE FROM period_closes WHERE id = 2`)
	if rep := verified(t, e); rep.First() != nil {
		t.Fatalf("without anchors a truncated tail of closes looks like no close yet:\n%s", problems(rep))
	}
	rep, err := invoice.Verify(e.Ctx, e.DB, anchors...)
	if err != nil {
		t.Fatal(err)
	}
	if got := problems(rep); !strings.Contains(got, "close 2's seal is missing (the last seal is close 1's)") {
		t.Errorf("the closes' anchor does not catch the truncated tail:\n%s", got)
	}
}

// A close deleted from the middle breaks the next seal's link; a seal
// deleted leaves its close unsealed.
func TestVerifyReportsDeletedCloseAndSeal(t *testing.T) {
	e := sealedMonths(t)
	e.allowDelete("close_seals")
	e.Exec(`DELETE FROM close_seals WHERE close_id = 1`)
	got := problems(verified(t, e))
	for _, want := range []string{"close 1 (2026-10 in UTC for all customers) has no seal", "close_seals row 2: prev_hash does not match the seal before it"} {
		if !strings.Contains(got, want) {
			t.Errorf("verify does not report %q:\n%s", want, got)
		}
	}
}

// October closed in Berlin and November in UTC leave an hour no close can
// bill; verify lists the row in it (the close refuses such a gap since).
func TestVerifyReportsUsageBetweenTwoZones(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-11-01T00:10:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("7"), At: ts("2026-10-31T23:30:00Z")}, // November 1, 00:30 in Berlin
		row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-11-03T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "Europe/Berlin"), All: true, Meters: invMeters, Now: at("2026-12-02T00:00:00Z")})
	// What an older hookledger let through: November closed in UTC.
	_, err := invoice.Close(e.Ctx, e.DB, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters, Now: at("2026-12-02T00:00:00Z")})
	if err == nil {
		t.Fatal("a close leaving a gap no close can fill was accepted")
	}
	for _, want := range []string{"2026-10 in Europe/Berlin", "2026-10-31T23:00:00Z", "2026-11-01T00:00:00Z", "--tz Europe/Berlin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters, Now: at("2026-12-02T00:00:00Z")}.LeavingGaps())
	got := problems(verified(t, e))
	if !strings.Contains(got, `billing coverage: metered_usage row 1: usage row of customer "c1", meter "api" at 2026-10-31T23:30:00Z lies between 2026-10 in Europe/Berlin for all customers (close 1, ending 2026-10-31T23:00:00Z) and 2026-11 in UTC for all customers (close 2, starting 2026-11-01T00:00:00Z): no close can bill it`) {
		t.Errorf("the row between the zones is not reported:\n%s", got)
	}
	if strings.Contains(got, "row 2:") {
		t.Errorf("a billed row is reported:\n%s", got)
	}
}

// Migration 0026 seals the closes made before it as a close seals its own:
// sealing again from the stored invoices gives the very same chain.
func TestMigrationSealsEarlierCloses(t *testing.T) {
	testenv.SQLiteOnly(t, "reopens the same database file")
	dir := t.TempDir()
	e := newEnvAt(t, dir)
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("2"), At: ts("2026-10-05T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("3"), At: ts("2026-10-06T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), Customer: "c1", Meters: invMeters, Now: at("2026-12-02T00:00:00Z")})
	seals := func(e *env) string {
		var b strings.Builder
		closes, _, err := e.DB.SealedCloses(e.Ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range closes {
			fmt.Fprintf(&b, "%d %v %d %x %x %x\n", c.ID, c.Sealed, c.Seal.Invoices, c.Seal.InvoicesDigest, c.Seal.PrevHash, c.Seal.RowHash)
		}
		return b.String()
	}
	written := seals(e)
	if strings.Count(written, " true 2 ") != 1 || strings.Count(written, " true 0 ") != 1 {
		t.Fatalf("seals as the closes wrote them (October: 2 invoices; November for c1, who had no usage: none):\n%s", written)
	}
	e.Close()
	// The database as it was before 0026.
	tamper(t, dir, `DROP TABLE close_seals`, `DELETE FROM schema_migrations WHERE version = 26`)
	e = newEnvAt(t, dir)
	defer e.Close()
	if got := seals(e); got != written {
		t.Fatalf("the migration sealed the closes as\n%s\nthe closes sealed themselves as\n%s", got, written)
	}
	if rep := verified(t, e); rep.First() != nil {
		t.Fatalf("after the migration:\n%s", problems(rep))
	}
}

// Gaps finds event time between closed periods that no monthly close in
// their zones can fill, measured from the period that reaches furthest.
func TestGaps(t *testing.T) {
	closeOf := func(id int64, label, zone string) schema.PeriodClose {
		p := month(t, label, zone)
		return schema.PeriodClose{ID: id, Period: label, TZ: zone, PeriodStart: p.Start.UnixMilli(), PeriodEnd: p.End.UnixMilli()}
	}
	for _, c := range []struct {
		name   string
		closes []schema.PeriodClose
		want   string
	}{
		{"one zone, a month left open", []schema.PeriodClose{closeOf(1, "2026-09", "UTC"), closeOf(2, "2026-11", "UTC")}, ""},
		{"Berlin then UTC", []schema.PeriodClose{closeOf(1, "2026-10", "Europe/Berlin"), closeOf(2, "2026-11", "UTC")},
			"2026-10-31T23:00:00Z-2026-11-01T00:00:00Z after 1"},
		{"UTC then Berlin overlap, no gap", []schema.PeriodClose{closeOf(1, "2026-10", "UTC"), closeOf(2, "2026-11", "Europe/Berlin")}, ""},
		// October in UTC reaches past October in Berlin: November in UTC meets it.
		{"the furthest reach counts", []schema.PeriodClose{closeOf(1, "2026-10", "Europe/Berlin"), closeOf(2, "2026-10", "UTC"), closeOf(3, "2026-11", "UTC")}, ""},
		{"a month left open between zones", []schema.PeriodClose{closeOf(1, "2026-09", "Europe/Berlin"), closeOf(2, "2026-11", "UTC")},
			"2026-09-30T22:00:00Z-2026-11-01T00:00:00Z after 1"},
	} {
		var got []string
		for _, g := range invoice.Gaps(c.closes) {
			got = append(got, fmt.Sprintf("%s-%s after %d", time.UnixMilli(g.Start).UTC().Format(time.RFC3339), time.UnixMilli(g.End).UTC().Format(time.RFC3339), g.Before.ID))
		}
		if strings.Join(got, "; ") != c.want {
			t.Errorf("%s: gaps %q, want %q", c.name, got, c.want)
		}
	}
}
