package invoice_test

import (
	"fmt"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
)

// An invoice closed before zeros lost their sign stored a tiny negative
// line as -0.00; today the same line recomputes to 0.00. verify takes them
// for the same amount: an upgraded ledger with such an invoice verifies.
func TestVerifyAcceptsASignedZeroStoredBefore(t *testing.T) {
	testenv.SQLiteOnly(t, "reopens the same database file")
	dir := t.TempDir()
	e := newEnvAt(t, dir)
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("-1"), At: ts("2026-10-03T00:00:00Z")})
	res := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters,
		Now: at("2026-11-02T00:00:00Z"), Pricing: plansOf(t, "usd", nil, unitPlan("usd", "0.001"))})
	inv := res.Invoices[0]
	if got := inv.Lines[0].Money.Amount; got != "0.00" {
		t.Fatalf("a line of -0.001 USD is %q, want 0.00", got)
	}
	// As an older hookledger stored it: -0.00, its invoice's digest over
	// that text, and (after migration 0026) a seal over that digest.
	inv.Lines[0].Money.Amount = "-0.00"
	e.Close()
	tamper(t, dir, `DROP TRIGGER invoice_lines_no_update`, `DROP TRIGGER invoices_no_update`,
		`UPDATE invoice_lines SET amount = '-0.00' WHERE invoice_id = 1`,
		fmt.Sprintf(`UPDATE invoices SET digest = x'%x' WHERE id = 1`, invoice.InvoiceDigest(&inv)),
		`DROP TABLE close_seals`, `DELETE FROM schema_migrations WHERE version = 26`)
	e = newEnvAt(t, dir)
	defer e.Close()
	if rep := verified(t, e); rep.First() != nil {
		t.Fatalf("an invoice that says -0.00 where verify recomputes 0.00:\n%s", problems(rep))
	}
}
