package invoice_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

// seedForSince is a ledger a full verify has passed: c1's October (five
// api rows) closed with prices and paid from a grant of 1000.00, the usage
// state built. The anchors are the ones that verify printed: ledger row 5,
// receipt 5, close 1, credit entry 2 (the grant, then October's burn).
func seedForSince(t *testing.T) (*env, []ledger.Anchor) {
	t.Helper()
	e := newEnv(t)
	t.Cleanup(e.Close)
	e.SetClock(ts("2026-10-01T00:00:00Z"))
	e.grant(invoice.GrantRequest{ID: "c1-prepaid", Customer: "c1", Currency: "USD", Amount: "1000.00"})
	if _, err := e.Writer.BuildUsageState(e.Ctx, "UTC"); err != nil {
		t.Fatal(err)
	}
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	for i := range 5 {
		e.Write(row{Customer: "c1", Meter: "api", Qty: q("2"), At: ts("2026-10-05T00:00:00Z").Add(time.Duration(i) * time.Hour)})
	}
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters,
		Now: at("2026-11-02T00:00:00Z"), Pricing: flatPricing(t)})
	rep := verified(t, e)
	if rep.First() != nil {
		t.Fatalf("full verify:\n%s", problems(rep))
	}
	want := []string{"ledger:5:", "receipts:5:", "closes:1:", "credits:2:"}
	if len(rep.Verified) != len(want) || len(rep.Anchors) != len(want) {
		t.Fatalf("verified anchors %v, want %v", rep.Anchors, want)
	}
	for i, w := range want {
		if !strings.HasPrefix(rep.Anchors[i], w) || rep.Verified[i].String() != rep.Anchors[i] {
			t.Fatalf("verified anchors %v, want %v", rep.Anchors, want)
		}
	}
	return e, rep.Verified
}

// appendNovember writes two customers' November rows after the anchors
// (ledger rows and receipts 6 to 9).
func appendNovember(e *env) {
	e.SetClock(ts("2026-11-03T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-11-02T00:00:00Z")})
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("4"), At: ts("2026-11-02T01:00:00Z")})
	e.Write(row{Customer: "c2", Meter: "api", Qty: q("3"), At: ts("2026-11-02T02:00:00Z")},
		row{Customer: "c2", Meter: "seats", Qty: q("7"), At: ts("2026-11-02T03:00:00Z")})
}

func verifiedSince(t *testing.T, e *env, from []ledger.Anchor) *invoice.VerifyReport {
	t.Helper()
	rep, err := invoice.VerifySince(e.Ctx, e.DB, from)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func check(t *testing.T, rep *invoice.VerifyReport, name string) ledger.CheckResult {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %q", name)
	return ledger.CheckResult{}
}

// An incremental verify after appended rows is clean, reads the new rows
// (and the anchored one) only, says so in every check, and verifies up to
// the new ends, from which the next one starts.
func TestVerifySinceAppended(t *testing.T) {
	e, anchors := seedForSince(t)
	appendNovember(e)
	rep := verifiedSince(t, e, anchors)
	if rep.First() != nil {
		t.Fatalf("incremental verify of an intact ledger:\n%s", problems(rep))
	}
	if c := rep.Checks[0]; c.Name != "since anchors" || c.Checked != 4 {
		t.Errorf("first check: %+v, want the 4 anchors --since starts from", c)
	}
	if c := check(t, rep, "integrity_check"); !strings.Contains(c.Skipped, "the full verify runs it") {
		t.Errorf("integrity_check under --since: %+v", c)
	}
	for _, c := range rep.Checks {
		switch {
		case c.Name == "since anchors" || c.Name == "integrity_check" || c.Name == "anchors":
		case !strings.HasPrefix(c.From, "incremental: ") && !strings.HasPrefix(c.From, "in full: "):
			t.Errorf("%s does not say what it covered: %q", c.Name, c.From)
		}
	}
	for name, want := range map[string]struct {
		from    string
		checked int64
	}{
		"hash chain":              {"incremental: ledger rows from 5", 5}, // the anchored row and 4 new ones
		"receipt chain":           {"incremental: receipts from 5", 5},
		"receipts and usage rows": {"incremental: receipts after 5, ledger rows after 5", 4},
		"receipt bodies":          {"incremental: receipts after 5", 4},
		"usage state":             {"incremental: the months of ledger rows after 5", 3}, // c1 api, c2 api, c2 seats in November
		"invoices":                {"incremental: the invoices of closes after 1", 0},
		"credits":                 {"incremental: credit entries from 2, the invoices of closes after 1", 1},
	} {
		if c := check(t, rep, name); c.From != want.from || c.Checked != want.checked {
			t.Errorf("%s: from %q, checked %d; want %q, %d", name, c.From, c.Checked, want.from, want.checked)
		}
	}
	if len(rep.Verified) != 4 || rep.Verified[0].ID != 9 || rep.Verified[1].ID != 9 {
		t.Fatalf("verified up to %v, want ledger 9 and receipts 9", rep.Anchors)
	}
	// The next incremental verify starts at the new ends.
	rep = verifiedSince(t, e, rep.Verified)
	if rep.First() != nil || check(t, rep, "hash chain").Checked != 1 {
		t.Fatalf("verify from the new anchors: hash chain checked %d\n%s", check(t, rep, "hash chain").Checked, problems(rep))
	}
	// A chain without an anchor is checked in full, and says so.
	rep = verifiedSince(t, e, anchors[:1])
	if c := check(t, rep, "receipt chain"); rep.First() != nil || c.From != "incremental: every receipt (no receipts anchor)" || c.Checked != 9 {
		t.Errorf("receipt chain without its anchor: %+v\n%s", c, problems(rep))
	}
}

// What each edit looks like to an incremental verify from the anchors: an
// edit after them, of the anchored row itself, a deleted tail, a new
// close's edited invoice and a new burn's edited amount are caught; an
// edit before them is not (the full verify's to find).
func TestVerifySinceCatchesEdits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table string // whose edits to allow
		edit  []string
		close bool   // close November before the edit
		check string // the check that must name it ("": none, only the full verify)
		id    int64
		msg   string
	}{
		{name: "row after the anchor", table: "metered_usage", edit: []string{`UPDATE metered_usage SET quantity = 9000000 WHERE id = 7`},
			check: "hash chain", id: 7, msg: "row_hash does not match the row's contents"},
		{name: "anchored row's contents", table: "metered_usage", edit: []string{`UPDATE metered_usage SET quantity = 9000000 WHERE id = 5`},
			check: "hash chain", id: 5, msg: "row_hash does not match the row's contents"},
		{name: "anchored row's hash", table: "metered_usage", edit: []string{`UPDATE metered_usage SET row_hash = prev_hash WHERE id = 5`},
			check: "since anchors", id: 5, msg: "the chain was rewritten since the anchor was taken"},
		{name: "tail after the anchor deleted", table: "metered_usage", edit: []string{`DELETE FROM metered_usage WHERE id > 7`},
			check: "chain head", id: 9, msg: "ledger rows 8 to 9 are missing"},
		{name: "usage state of a new row's month", table: "usage_state",
			edit:  []string{`UPDATE usage_state SET used = '99' WHERE customer_id = 'c2' AND meter = 'seats'`},
			check: "usage state", msg: `customer "c2" meter "seats" month from 2026-11-01T00:00:00Z: used is 99 but the ledger sums to 7`},
		{name: "new close's invoice", table: "invoices", close: true, edit: []string{`UPDATE invoices SET total = '1.00' WHERE close_id = 2 AND customer_id = 'c1'`},
			check: "invoices", msg: "stored digest does not match"},
		{name: "new burn", table: "credit_entries", close: true,
			edit:  []string{`UPDATE credit_entries SET amount = '380.00' WHERE kind = 'burn' AND id > 2`},
			check: "credits", id: 3, msg: "row_hash does not match the entry's contents"},
		{name: "row before the anchor", table: "metered_usage", edit: []string{`UPDATE metered_usage SET quantity = 9000000 WHERE id = 2`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, anchors := seedForSince(t)
			appendNovember(e)
			if tc.close {
				e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters,
					Now: at("2026-12-02T00:00:00Z"), Pricing: flatPricing(t)})
			}
			if rep := verifiedSince(t, e, anchors); rep.First() != nil {
				t.Fatalf("before the edit:\n%s", problems(rep))
			}
			e.allowEdits(tc.table)
			for _, s := range tc.edit {
				e.Exec(s)
			}
			rep := verifiedSince(t, e, anchors)
			if tc.check == "" {
				if rep.First() != nil {
					t.Fatalf("an edit before the anchors was seen by --since:\n%s", problems(rep))
				}
				if p := verified(t, e).First(); p == nil || p.Check != "hash chain" || p.ID != 2 {
					t.Fatalf("the full verify: %+v, want row 2's hash", p)
				}
				return
			}
			if rep.Verified != nil {
				t.Errorf("a broken verify printed anchors: %v", rep.Anchors)
			}
			found := problems(rep)
			var hit bool
			for _, p := range check(t, rep, tc.check).Problems {
				hit = hit || (tc.id == 0 || p.ID == tc.id) && strings.Contains(p.Msg, tc.msg)
			}
			if !hit {
				t.Errorf("want %s to name row %d: %q; found:\n%s", tc.check, tc.id, tc.msg, found)
			}
		})
	}
}

// Anchors an incremental verify cannot start from are refused before it
// reads anything (the CLI's exit 2); an anchor from another ledger is a
// problem found (exit 3).
func TestVerifySinceBadAnchors(t *testing.T) {
	e, anchors := seedForSince(t)
	_, err := invoice.VerifySince(e.Ctx, e.DB, []ledger.Anchor{anchors[0], {Chain: ledger.ChainLedger, ID: 3, Hash: anchors[0].Hash}})
	if !errors.Is(err, invoice.ErrBadSince) || !strings.Contains(err.Error(), "two ledger anchors (5 and 3)") {
		t.Errorf("two ledger anchors: %v", err)
	}
	other := anchors[0]
	other.Hash = anchors[1].Hash // not this ledger's row 5
	rep := verifiedSince(t, e, []ledger.Anchor{other})
	if p := rep.First(); p == nil || p.Check != "since anchors" || p.ID != 5 || !strings.Contains(p.Msg, fmt.Sprintf("anchor %s", other)) {
		t.Errorf("an anchor of another ledger: %+v", p)
	}
}
