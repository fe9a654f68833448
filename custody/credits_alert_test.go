package custody_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

// creditAlert reads the alert of crossing c: its receipt (provider
// hookledger, source alert, status ignored), its event id and its body.
func creditAlert(t *testing.T, e *env, c creditCrossingRow) (eventID, eventType string, a entitle.CreditAlert) {
	t.Helper()
	var r struct {
		EventID   string `db:"event_id"`
		EventType string `db:"event_type"`
		Body      []byte `db:"body"`
	}
	if err := e.DB.Read.Get(&r, `SELECT event_id, event_type, body FROM receipts WHERE id = ? AND provider = 'hookledger'
		AND source = 'alert' AND status = 'ignored'`, c.ReceiptID); err != nil {
		t.Fatalf("alert receipt %d: %v", c.ReceiptID, err)
	}
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatal(err)
	}
	return r.EventID, r.EventType, a
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantCrossings(t *testing.T, e *env, want ...string) []creditCrossingRow {
	t.Helper()
	cs := creditCrossings(t, e)
	got := make([]string, len(cs))
	for i, c := range cs {
		got[i] = c.String()
	}
	if !slices.Equal(got, want) {
		t.Fatalf("credit crossings:\n%q\nwant\n%q", got, want)
	}
	return cs
}

// A grant of 100.00 USD, usage priced 0.01 a request, thresholds 25%,
// 10.00 and depleted, by hand: 7,400 requests draw 74.00 (available
// 26.00): nothing. 100 more draw 75.00: available 25.00, exactly 25% of
// the grant, fires "25%" with that row. 8,999 requests leave 10.01:
// nothing; the 9,000th leaves 10.00 and fires "10.00", after a restart;
// 10,000 leave 0.00 and fire depleted. Nothing fires again, in later
// batches or after another restart; a row of another month than the
// open one draws nothing. Each alert is a receipt of provider hookledger
// with one outbox message, its body the numbers at the crossing row.
func TestCreditAlertsFireOnceAtTheirThresholds(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newCreditEnv(t, backend, "", creditAlerts)
		grantCredit(t, e, "g1", "100.00", 50)
		october := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":9500,"occurred_at":"2026-10-15T10:00:00Z"}}`)
		send(t, e, "late", october) // October's: not the open month's draw
		send(t, e, "a", testenv.UsageBody("cus_1", "api_requests", "7400"))
		wantCrossings(t, e)
		b := send(t, e, "b", testenv.UsageBody("cus_1", "api_requests", "100"))
		cs := wantCrossings(t, e, "g1 25% (25.00): balance 100.00 drawn 75.00 available 25.00")
		if cs[0].RowID != b {
			t.Errorf("crossed by row %d, want %d", cs[0].RowID, b)
		}
		id, typ, a := creditAlert(t, e, cs[0])
		if id != entitle.CreditAlertEventID("g1", "25%") || typ != entitle.CreditBalanceLowType {
			t.Errorf("alert %s of type %s", id, typ)
		}
		want := entitle.CreditAlert{Type: "credits.balance_low", Customer: "cus_1",
			Grant:     entitle.CreditAlertGrant{ID: "g1", Currency: "USD", Amount: "100.00", Category: "paid", Priority: 50},
			Threshold: "25%", Plan: "credit@2026-01-01", CrossedAt: "2026-11-29T12:00:00Z",
			Period: entitle.PeriodJSON{Label: "2026-11", Zone: "UTC", Start: "2026-11-01T00:00:00Z", End: "2026-12-01T00:00:00Z"},
			Row: entitle.AlertRow{ID: b, Kind: "usage", Provider: "default", EventID: "b", Quantity: ledger.TotalOf(100 * ledger.Scale),
				OccurredAt: "2026-11-29T10:00:00Z"}}
		if a.Amount.String() != "25.00" || a.Balance.String() != "100.00" || a.Drawn.String() != "75.00" || a.Available.String() != "25.00" ||
			a.Spent.String() != "75.00" {
			t.Errorf("alert numbers: amount %s balance %s drawn %s available %s spent %s", a.Amount, a.Balance, a.Drawn, a.Available, a.Spent)
		}
		a.Amount, a.Balance, a.Drawn, a.Available, a.Spent = want.Amount, want.Balance, want.Drawn, want.Available, want.Spent
		if got, want := mustJSON(t, a), mustJSON(t, want); got != want {
			t.Errorf("alert\n%s\nwant\n%s", got, want)
		}

		send(t, e, "c", testenv.UsageBody("cus_1", "api_requests", "1499")) // 8,999: 10.01 left
		wantCrossings(t, e, "g1 25% (25.00): balance 100.00 drawn 75.00 available 25.00")
		e.Reopen()
		send(t, e, "d", testenv.UsageBody("cus_1", "api_requests", "1")) // 9,000: 10.00 left
		send(t, e, "e", testenv.UsageBody("cus_1", "api_requests", "1000"))
		send(t, e, "f", testenv.UsageBody("cus_1", "api_requests", "1"))
		e.Reopen()
		send(t, e, "g", testenv.UsageBody("cus_1", "api_requests", "500"))
		cs = wantCrossings(t, e,
			"g1 25% (25.00): balance 100.00 drawn 75.00 available 25.00",
			"g1 10.00 (10.00): balance 100.00 drawn 90.00 available 10.00",
			"g1 depleted (0.00): balance 100.00 drawn 100.00 available 0.00")
		if id, typ, a := creditAlert(t, e, cs[2]); id != entitle.CreditAlertEventID("g1", "depleted") || typ != entitle.CreditDepletedType ||
			a.Type != typ || a.Threshold != "depleted" || a.Row.EventID != "e" || a.Spent.String() != "100.00" {
			t.Errorf("depleted alert %s %s %+v", id, typ, a)
		}
		if n := e.Int(`SELECT COUNT(*) FROM outbox o JOIN receipts r ON r.id = o.receipt_id WHERE r.provider = 'hookledger' AND o.destination = 'app'`); n != 3 {
			t.Errorf("%d outbox messages for credit alerts, want 3", n)
		}

		// verify checks each crossing against the ledgers: clean as written,
		// and a recorded balance edited behind their back is reported.
		rep, err := invoice.Verify(t.Context(), e.DB)
		if err != nil {
			t.Fatal(err)
		}
		if p := rep.First(); p != nil {
			t.Fatalf("verify: %v", p)
		}
		if e.DB.Postgres() {
			e.Exec(`ALTER TABLE credit_crossings DISABLE TRIGGER credit_crossings_no_update`)
		} else {
			e.Exec(`DROP TRIGGER credit_crossings_no_update`)
		}
		e.Exec(`UPDATE credit_crossings SET balance = '90.00', drawn = '65.00' WHERE threshold = '25%'`)
		if rep, err = invoice.Verify(t.Context(), e.DB); err != nil {
			t.Fatal(err)
		}
		if p := rep.First(); p == nil || p.Table != "credit_crossings" ||
			!strings.Contains(p.Msg, "records a balance of 90.00, the credit ledger says grant g1 had 100.00 then") {
			t.Errorf("verify after a crossing's balance was edited: %v", p)
		}
	})
}

// Grants pay in the burn order, and so are drawn in it: a second grant of
// 50.00 with priority 10 pays before the first (priority 50). With it,
// 7,500 requests (75.00) draw all of its 50.00 (its 25%, 10.00 and
// depleted fire with that one row) and 25.00 of the first, which has 75.00
// available and fires nothing where it alone would have fired 25%. The
// first's 25% fires at 12,500 requests (125.00: 75.00 drawn from it).
func TestCreditAlertsDrawTheGrantThatPaysFirst(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newCreditEnv(t, backend, "", creditAlerts)
		grantCredit(t, e, "g1", "100.00", 50)
		send(t, e, "a", testenv.UsageBody("cus_1", "api_requests", "7400"))
		grantCredit(t, e, "g2", "50.00", 10)
		b := send(t, e, "b", testenv.UsageBody("cus_1", "api_requests", "100"))
		cs := wantCrossings(t, e,
			"g2 25% (12.50): balance 50.00 drawn 50.00 available 0.00",
			"g2 10.00 (10.00): balance 50.00 drawn 50.00 available 0.00",
			"g2 depleted (0.00): balance 50.00 drawn 50.00 available 0.00")
		for _, c := range cs {
			if c.RowID != b {
				t.Errorf("%s crossed by row %d, want %d", c, c.RowID, b)
			}
		}
		send(t, e, "c", testenv.UsageBody("cus_1", "api_requests", "4999")) // 124.99: 25.01 left of g1
		send(t, e, "d", testenv.UsageBody("cus_1", "api_requests", "1"))
		wantCrossings(t, e,
			"g2 25% (12.50): balance 50.00 drawn 50.00 available 0.00",
			"g2 10.00 (10.00): balance 50.00 drawn 50.00 available 0.00",
			"g2 depleted (0.00): balance 50.00 drawn 50.00 available 0.00",
			"g1 25% (25.00): balance 100.00 drawn 75.00 available 25.00")
	})
}

// A grant, a void or an expiry changes the balances a batch read: the rows
// after it in the same batch draw from the credit as it is then. A grant
// made between two rows of one batch fires with the second; a void
// between them keeps the voided grant from firing; a grant made in the
// batch that takes it low fires with that batch's row.
func TestCreditAlertsSeeTheGrantsAndVoidsOfTheirBatch(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newCreditEnv(t, backend, "", creditAlerts)
		b := usageOp(e, "b", "100")
		for i, err := range submitOneBatch(t, e, usageOp(e, "a", "7400"), grantOp("g1", "100.00", 50), b) {
			if err != nil {
				t.Fatalf("op %d: %v", i, err)
			}
		}
		cs := wantCrossings(t, e, "g1 25% (25.00): balance 100.00 drawn 75.00 available 25.00")
		if _, _, a := creditAlert(t, e, cs[0]); a.Row.EventID != "b" {
			t.Errorf("crossed by %s, want b", a.Row.EventID)
		}
		// 8,999, void g1, 9,000: g1's 10.00 never fires.
		void := &custody.VoidCredit{GrantID: "g1", Reason: "refunded", Actor: "ops"}
		for i, err := range submitOneBatch(t, e, usageOp(e, "c", "1499"), void, usageOp(e, "d", "1")) {
			if err != nil {
				t.Fatalf("op %d: %v", i, err)
			}
		}
		wantCrossings(t, e, "g1 25% (25.00): balance 100.00 drawn 75.00 available 25.00")
		// g2 pays the 90.01 of 9,001 requests, in the batch that grants it.
		for i, err := range submitOneBatch(t, e, usageOp(e, "e", "0"), grantOp("g2", "100.00", 50), usageOp(e, "f", "1")) {
			if err != nil {
				t.Fatalf("op %d: %v", i, err)
			}
		}
		wantCrossings(t, e,
			"g1 25% (25.00): balance 100.00 drawn 75.00 available 25.00",
			"g2 25% (25.00): balance 100.00 drawn 90.01 available 9.99",
			"g2 10.00 (10.00): balance 100.00 drawn 90.01 available 9.99")
	})
}

// Without credits.alerts the writer draws nothing: a grant taken to zero
// fires nothing, and credit_crossings stays empty.
func TestCreditAlertsOffWithoutTheSection(t *testing.T) {
	e := newCreditEnv(t, "", "", "")
	if e.Writer.Limits.CreditAlerting() {
		t.Fatal("credit alerts configured without a credits section")
	}
	grantCredit(t, e, "g1", "100.00", 50)
	send(t, e, "a", testenv.UsageBody("cus_1", "api_requests", "20000"))
	wantCrossings(t, e)
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE provider = 'hookledger'`); n != 0 {
		t.Errorf("%d alerts raised, want none", n)
	}
}
