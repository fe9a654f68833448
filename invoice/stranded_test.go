package invoice_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
)

// Usage dated before the first period closed for its customer is on no path
// to an invoice (closes run forward), and not late usage either: it is
// listed by StrandedUsage and counted by StrandedRows, whether it came
// before the close or after, until it is corrected to nothing; a customer's
// own earlier close moves their boundary back.
func TestStrandedUsage(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := &env{testenv.NewLedger(t, testenv.Options{Backend: backend, Now: time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)})}
		e.Write(
			row{Customer: "cus_1", Meter: "api", Qty: q("5"), At: ts("1971-01-01T00:00:00Z")}, // a clock at zero, near enough
			row{Customer: "cus_1", Meter: "api", Qty: q("2"), At: ts("2026-08-15T00:00:00Z")},
			row{Customer: "cus_1", Meter: "api", Qty: q("3"), At: ts("2026-09-10T00:00:00Z")},
			row{Customer: "cus_2", Meter: "api", Qty: q("7"), At: ts("2026-08-20T00:00:00Z")},
		)
		if got := stranded(t, e); got != "" {
			t.Fatalf("before any close: %s, want nothing", got)
		}
		e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-07", "UTC"), Customer: "cus_2", Meters: invMeters, Now: at("2026-10-02T00:00:00Z")})
		e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-09", "UTC"), All: true, Meters: invMeters, Now: at("2026-10-02T00:00:00Z")})
		// After the close: cus_3's first usage, dated August.
		e.Write(row{Customer: "cus_3", Meter: "api", Qty: q("4"), At: ts("2026-08-05T00:00:00Z")})
		want := "cus_1 api 1971-01 rows 1 adj 0 sum 5 before 2026-09\n" +
			"cus_1 api 2026-08 rows 1 adj 0 sum 2 before 2026-09\n" +
			"cus_3 api 2026-08 rows 1 adj 0 sum 4 before 2026-09\n"
		if got := stranded(t, e); got != want {
			t.Errorf("stranded:\n%s\nwant (cus_2 closed July itself; September was closed)\n%s", got, want)
		}
		if n, err := invoice.StrandedRows(e.Ctx, e.DB); err != nil || n != 3 {
			t.Errorf("StrandedRows = %d, %v; want 3", n, err)
		}
		lines, err := invoice.StrandedUsage(e.Ctx, e.DB, "cus_3")
		if err != nil || len(lines) != 1 || lines[0].MinID != 5 || lines[0].MaxID != 5 {
			t.Errorf("cus_3 alone: %+v %v", lines, err)
		}
		// Corrected to nothing, the 1971 row is no longer listed.
		e.Write(row{Customer: "cus_1", Meter: "api", Qty: q("-5"), At: ts("1971-01-01T00:00:00Z"), Adjust: true})
		if n, err := invoice.StrandedRows(e.Ctx, e.DB); err != nil || n != 2 {
			t.Errorf("after the correction: StrandedRows = %d, %v; want 2", n, err)
		}
	})
}

func stranded(t *testing.T, e *env) string {
	t.Helper()
	lines, err := invoice.StrandedUsage(e.Ctx, e.DB, "")
	if err != nil {
		t.Fatal(err)
	}
	var s string
	for _, l := range lines {
		s += fmt.Sprintf("%s %s %s rows %d adj %d sum %s before %s\n", l.Customer, l.Meter, l.Month, l.Rows, l.Adjustments, l.Sum, l.FirstClosed)
	}
	return s
}
