package dispute

import (
	"bytes"
	"context"
	"github.com/hookledger/hookledger/internal/testenv"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookledger/hookledger/ledger"
)

func TestTableFitsWidth(t *testing.T) {
	testenv.SQLiteOnly(t, "edits rows in SQLite's dialect")
	e := seedAllSchemes(t)
	// Long values everywhere a table has a column: event id, user agent,
	// reason, and a payload mismatch (the longest outcome).
	long := "evt_" + strings.Repeat("0123456789", 12)
	b := body("stripe", long, "cus_1", "api_requests", "1", "2026-10-10T08:00:00Z")
	h := http.Header{}
	p := e.Server.Providers["stripe"]
	p.Scheme.Sign(h, b, p.Keys[0], long, "", e.Now())
	h.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks) "+strings.Repeat("extra/1.0 ", 20))
	if code, _ := e.Post("stripe", h, b); code != 200 {
		t.Fatalf("post: %d", code)
	}
	mismatch := body("stripe", long, "cus_1", "api_requests", "100", "2026-10-10T08:00:00Z")
	h2 := http.Header{}
	p.Scheme.Sign(h2, mismatch, p.Keys[0], long, "", e.Now())
	if code, _ := e.Post("stripe", h2, mismatch); code != 200 {
		t.Fatalf("post: %d", code)
	}
	e.adjust(ledger.Adjustment{Customer: "cus_1", Meter: "seats", Quantity: ledger.TotalOf(ledger.Scale),
		Reason: strings.Repeat("a very long reason for a correction ", 5), OccurredAt: time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC)})
	e.Exec(`UPDATE receipts SET body = CAST('{}' AS BLOB) WHERE event_id = 'Ev08MFMKH6'`) // invalid: a long detail

	oct, _ := ledger.MonthPeriod("2026-10", time.UTC)
	tr, err := e.tracer(nil).Customer(context.Background(), "cus_1", oct)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := WriteTable(&out, tr); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for i, line := range strings.Split(text, "\n") {
		if n := utf8.RuneCountInString(line); n > Width {
			t.Errorf("line %d has %d characters:\n%s", i+1, n, line)
		}
	}
	for _, want := range []string{
		"DISPUTE customer:cus_1@2026-10",
		"CUSTOMER cus_1  period 2026-10 (UTC)",
		"INVOICE 1  customer cus_1",
		"LINE invoice:1/1  api_requests  sum",
		"BILLED", "LEDGER ROWS  meter seats", // the late rows are not billed yet
		"EVENT stripe:evt_0123456789",
		"payload_mismatch",
		"signature  invalid",
		"signature  body pruned by retention",
		"bodies: 6 valid, 1 invalid, 0 not verifiable, 1 pruned",
		"PROBLEM: event slack:Ev08MFMKH6: the stored body hashes to",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log("\n" + text)
	}
}

func TestClipAndTable(t *testing.T) {
	if got := clip("abcdef", 4); got != "abc…" {
		t.Errorf("clip: %q", got)
	}
	if got := clip("abc", 4); got != "abc" {
		t.Errorf("clip short: %q", got)
	}
	var b bytes.Buffer
	p := &printer{w: &b}
	p.table("", []column{{name: "a"}, {name: "b", elastic: true}}, [][]string{{strings.Repeat("x", 60), strings.Repeat("y", 60)}}, []string{"note"})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || utf8.RuneCountInString(lines[1]) != Width || lines[2] != strings.Repeat(" ", 62)+"note" {
		t.Errorf("table:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "y…") {
		t.Errorf("the elastic column was not cut: %q", b.String())
	}
}

// A cut event id keeps the part that tells it from its neighbours: the tail
// when ids differ at the end, a window when they differ in the middle of a
// long id; a reason is cut at its end.
func TestDistinctCuts(t *testing.T) {
	cells := []string{
		"api:app:api-gateway#cus_big_customer_request_0001",
		"api:app:api-gateway#cus_big_customer_request_0002",
		"api:app:api-gateway#req-0001-for-a-very-long-customer-name-ok",
		"api:app:api-gateway#req-0002-for-a-very-long-customer-name-ok",
		"stripe:evt_1",
		"adjustment: evt_1Q0b was a test event",
	}
	prose := []bool{false, false, false, false, false, true}
	want := []string{
		"api:ap…_request_0001",
		"api:ap…_request_0002",
		"api:ap…0001-for-a-v…",
		"api:ap…0002-for-a-v…",
		"stripe:evt_1",
		"adjustment: evt_1Q0…",
	}
	got := distinct(cells, prose, 20)
	for i := range want {
		if got[i] != want[i] || utf8.RuneCountInString(got[i]) > 20 {
			t.Errorf("%q cut to %q, want %q", cells[i], got[i], want[i])
		}
	}
}
