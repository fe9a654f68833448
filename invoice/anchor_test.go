package invoice_test

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"

	"github.com/hookledger/hookledger/ledger"
)

// rewindHead points chain_head at the rows that are left, as an attacker who
// read the schema would after deleting the newest rows: then only an anchor
// kept outside the database shows what is gone.
var rewindHead = []string{
	`DROP TRIGGER chain_head_forward_only`,
	`UPDATE chain_head SET
		ledger_id = (SELECT MAX(id) FROM metered_usage), ledger_hash = (SELECT row_hash FROM metered_usage ORDER BY id DESC LIMIT 1),
		receipt_id = (SELECT MAX(id) FROM receipts), receipt_hash = (SELECT row_hash FROM receipts ORDER BY id DESC LIMIT 1)`,
}

func head(t *testing.T, e *env) []ledger.Anchor {
	t.Helper()
	h, err := ledger.LoadHead(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	return h.Anchors()
}

func verifiedWith(t *testing.T, e *env, anchors []ledger.Anchor) *invoice.VerifyReport {
	t.Helper()
	rep, err := invoice.Verify(e.Ctx, e.DB, anchors...)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestAnchorDetectsTailTruncatedWithTheHead(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedWithTail(t)
	defer e.Close()
	anchors := head(t, e) // ledger:7, receipts:8
	if anchors[0].ID != 7 || anchors[1].ID != 8 {
		t.Fatalf("head: %v", anchors)
	}
	e.ignored("ign_2")
	// An anchor from before later writes still holds.
	if rep := verifiedWith(t, e, anchors); rep.First() != nil || rep.Checks[len(rep.Checks)-1].Checked != 2 {
		t.Fatalf("older anchors on an intact database:\n%s", problems(rep))
	}

	tamper(t, dir, append(append(truncateTail, `DELETE FROM delivery_attempts WHERE event_id = 'ign_2'`,
		`DELETE FROM receipts WHERE event_id = 'ign_2'`), rewindHead...)...)
	if rep := verified(t, e); rep.First() != nil {
		t.Fatalf("without anchors a consistent truncation is not detectable, got:\n%s", problems(rep))
	}
	rep := verifiedWith(t, e, anchors)
	c := rep.Checks[len(rep.Checks)-1]
	if c.Name != "anchors" || len(c.Problems) != 2 {
		t.Fatalf("anchors check: %+v", c)
	}
	for i, want := range []string{"anchor " + anchors[0].String() + ": row 7 is missing", "anchor " + anchors[1].String() + ": row 8 is missing"} {
		if !strings.Contains(c.Problems[i].Msg, want) {
			t.Errorf("problem %d: %q, want %q", i, c.Problems[i].Msg, want)
		}
	}
}

func TestAnchorDetectsDeletedNewestIgnoredReceipt(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedWithTail(t)
	defer e.Close()
	e.ignored("ign_2") // receipt 9
	anchors := head(t, e)
	tamper(t, dir, append([]string{`DELETE FROM delivery_attempts WHERE event_id = 'ign_2'`, `DELETE FROM receipts WHERE event_id = 'ign_2'`},
		rewindHead...)...)
	p := verifiedWith(t, e, anchors).First()
	if p == nil || p.Check != "anchors" || p.Table != "receipts" || p.ID != 9 || !strings.Contains(p.Msg, anchors[1].String()) {
		t.Fatalf("deleted newest ignored receipt with an anchor: %+v", p)
	}
}

func TestAnchorDetectsRechainedLedger(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedWithTail(t)
	defer e.Close()
	anchors := head(t, e)
	// A different row 7: the anchored id exists, its hash does not match.
	tamper(t, dir, `DROP TRIGGER metered_usage_no_update`, `UPDATE metered_usage SET row_hash = zeroblob(32) WHERE id = 7`)
	rep := verifiedWith(t, e, anchors)
	c := rep.Checks[len(rep.Checks)-1]
	if len(c.Problems) != 1 || c.Problems[0].ID != 7 || !strings.Contains(c.Problems[0].Msg, "row 7's row_hash is 0000") {
		t.Fatalf("anchors check: %+v", c.Problems)
	}
}

func TestParseAnchors(t *testing.T) {
	const h = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	text := strings.Join([]string{
		`time=2026-11-01T00:00:00Z level=INFO msg="chain head" ledger=ledger:12:` + h + ` receipts=receipts:30:` + h,
		`{"time":"2026-11-01T00:05:00Z","level":"INFO","msg":"chain head","ledger":"ledger:13:` + h + `","receipts":"receipts:31:` + h + `"}`,
		`CHAIN     ID  ANCHOR`,
		`ledger    14  ledger:14:` + h,
		`credits   3   credits:3:` + h,
		``,
		`level=INFO msg="prune receipts: deleted 3"`,
	}, "\n")
	as, err := ledger.ParseAnchors(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range as {
		got = append(got, a.String())
	}
	want := "ledger:12:" + h + " receipts:30:" + h + " ledger:13:" + h + " receipts:31:" + h + " ledger:14:" + h + " credits:3:" + h
	if strings.Join(got, " ") != want {
		t.Fatalf("anchors:\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	for name, tc := range map[string]struct{ in, want string }{
		"short hash": {"ok\nledger:12:9f86", "line 2: anchor \"ledger:12:9f86\": hash is not 64 hex digits"},
		"not hex":    {"ledger:12:" + strings.Repeat("zz", 32), "hash is not 64 hex digits"},
		"no anchors": {"level=INFO msg=serving\n", "no anchors"},
		"empty":      {"", "no anchors"},
	} {
		if _, err := ledger.ParseAnchors(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	for _, bad := range []string{"12:" + h, "ledgers:12:" + h, "ledger:-1:" + h, "ledger:x:" + h, "ledger:12:" + h[:62], "ledger:12:" + h + ":7"} {
		if _, err := ledger.ParseAnchor(bad); err == nil {
			t.Errorf("ParseAnchor(%q) accepted", bad)
		}
	}
}
