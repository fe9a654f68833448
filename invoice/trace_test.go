package invoice_test

import (
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// CheckLinksBatch must say exactly what CheckLinks says, row by row, on an
// intact chain and after each kind of tampering.
func TestCheckLinksBatchAgreesWithCheckLinks(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e := newEnv(t)
	defer e.Close()
	for i := range 8 {
		e.Write(row{Customer: "c", Meter: "m", Qty: q("1"), At: ts("2026-10-01T00:00:00Z").AddDate(0, 0, i)})
	}
	agree := func(name string, wantProblems int) {
		t.Helper()
		var recs []schema.LedgerRow
		if err := e.DB.Read.Select(&recs, `SELECT id, kind, provider, event_id, customer_id, meter, quantity, decimals, properties, reason, ref,
			occurred_at, recorded_at, prev_hash, row_hash FROM metered_usage ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		rows := make([]ledger.Row, len(recs))
		for i := range recs {
			rows[i] = ledger.StoredRow(&recs[i])
		}
		batch, err := invoice.CheckLinksBatch(e.Ctx, e.DB, rows)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			one, err := invoice.CheckLinks(e.Ctx, e.DB, r)
			if err != nil {
				t.Fatal(err)
			}
			if batch[r.ID] != one {
				t.Errorf("%s: row %d: batch %q, single %q", name, r.ID, batch[r.ID], one)
			}
		}
		if len(batch) != wantProblems {
			t.Errorf("%s: %d problems %v, want %d", name, len(batch), batch, wantProblems)
		}
	}
	agree("intact", 0)

	e.DB.Write.MustExec(`DROP TRIGGER metered_usage_no_update`)
	e.DB.Write.MustExec(`DROP TRIGGER metered_usage_no_delete`)
	e.DB.Write.MustExec(`UPDATE metered_usage SET quantity = 5000000 WHERE id = 3`)
	agree("edited row 3", 1) // its own hash

	r, err := invoice.GetRow(e.Ctx, e.DB, 3)
	if err != nil {
		t.Fatal(err)
	}
	e.DB.Write.MustExec(`UPDATE metered_usage SET row_hash = ? WHERE id = 3`, r.Hash(r.PrevHash))
	agree("row 3 rehashed", 2) // row 3's next link and row 4's prev link

	e.DB.Write.MustExec(`DELETE FROM metered_usage WHERE id = 6`)
	agree("row 6 deleted", 4) // and rows 5 and 7 on either side of the gap

	e.DB.Write.MustExec(`DELETE FROM metered_usage WHERE id = 8`)
	agree("head deleted", 4) // the new head has no next row: nothing to see there
}

func TestCovers(t *testing.T) {
	l := invoice.InvoiceLine{Customer: "c", Meter: "m", PeriodStart: 100, PeriodEnd: 200, AfterID: 10, ThroughID: 20}
	for _, c := range []struct {
		r    ledger.Row
		want bool
	}{
		{ledger.Row{ID: 11, Customer: "c", Meter: "m", OccurredAt: 100}, true},
		{ledger.Row{ID: 20, Customer: "c", Meter: "m", OccurredAt: 199}, true},
		{ledger.Row{ID: 10, Customer: "c", Meter: "m", OccurredAt: 150}, false}, // billed before
		{ledger.Row{ID: 21, Customer: "c", Meter: "m", OccurredAt: 150}, false}, // recorded after
		{ledger.Row{ID: 15, Customer: "c", Meter: "m", OccurredAt: 200}, false}, // period is half-open
		{ledger.Row{ID: 15, Customer: "c", Meter: "m", OccurredAt: 99}, false},
		{ledger.Row{ID: 15, Customer: "d", Meter: "m", OccurredAt: 150}, false},
		{ledger.Row{ID: 15, Customer: "c", Meter: "n", OccurredAt: 150}, false},
	} {
		if got := l.Covers(c.r); got != c.want {
			t.Errorf("%+v: %v, want %v", c.r, got, c.want)
		}
	}
}
