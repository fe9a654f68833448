package dispute

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// bigCustomer's usage: thirteen ingest API events whose ids share all but
// their last characters, sent by API key "app".
const bigCustomer = "cus_big"

func apiUsage(source, id string) []byte {
	b, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": id, "source": source, "type": "usage.recorded",
		"subject": bigCustomer, "time": "2026-10-05T10:00:00Z", "data": map[string]any{"meter": "api_requests", "quantity": 1}})
	return b
}

// seedAPI sends the thirteen events (and a retry of the first) and returns
// the API key's id.
func seedAPI(t *testing.T, e *env) int64 {
	t.Helper()
	key, id := e.CreateKey("app", 0, 0)
	var events [][]byte
	for i := 1; i <= 13; i++ {
		events = append(events, apiUsage("api-gateway", fmt.Sprintf("%s_customer_request_%04d", bigCustomer, i)))
	}
	for _, b := range [][]byte{testenv.Batch(events...), testenv.Batch(events[0])} {
		if r := e.PostEvents(key, ingest.MediaCloudEventBatch, b); r.Code != 200 {
			t.Fatalf("POST /v1/events: %d %s", r.Code, r.Raw)
		}
	}
	return id
}

func customerTrace(t *testing.T, e *env, customer string) *Trace {
	t.Helper()
	oct, _ := ledger.MonthPeriod("2026-10", time.UTC)
	tr, err := e.tracer(nil).Customer(context.Background(), customer, oct)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// Issue 41, items 9 and 10: a customer's ingest API events. The table tells
// their rows apart although the ids share all but their last characters,
// and the summary says what was verified of them (the API key that sent
// them, the body digest) instead of "not verifiable"; the JSON and the
// evidence bundle say the same.
func TestIngestEventsInTrace(t *testing.T) {
	e := newEnv(t)
	keyID := seedAPI(t, e)
	tr := customerTrace(t, e, bigCustomer)
	var text bytes.Buffer
	if err := WriteTable(&text, tr); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	defer func() {
		if t.Failed() {
			t.Log("\n" + out)
		}
	}()

	// The ledger rows: thirteen event cells, each different, each ending in
	// its own request number.
	var cells []string
	inRows := false
	for line := range strings.SplitSeq(out, "\n") {
		if utf8.RuneCountInString(line) > Width {
			t.Errorf("line wider than %d: %q", Width, line)
		}
		switch {
		case strings.HasPrefix(line, "  ROW  EVENT"):
			inRows = true
		case inRows && strings.HasPrefix(line, "  ") && len(strings.Fields(line)) > 2 && regexp.MustCompile(`^\d+$`).MatchString(strings.Fields(line)[0]):
			cells = append(cells, strings.Fields(line)[1])
		default:
			inRows = false
		}
	}
	if len(cells) != 13 {
		t.Fatalf("%d ledger rows in the table, want 13", len(cells))
	}
	seen := map[string]bool{}
	for i, c := range cells {
		if seen[c] {
			t.Errorf("two rows show the event %q", c)
		}
		seen[c] = true
		if want := fmt.Sprintf("_%04d", i+1); !strings.HasSuffix(c, want) || !strings.HasPrefix(c, "api:") {
			t.Errorf("row %d shows the event %q: want api:… ending in %s", i+1, c, want)
		}
	}
	// Each event's own section names it whole.
	for i := 1; i <= 13; i++ {
		if want := fmt.Sprintf("EVENT api:app:api-gateway#%s_customer_request_%04d  usage.recorded", bigCustomer, i); !strings.Contains(out, want) {
			t.Errorf("no %q", want)
		}
	}

	// What was verified, in the summary.
	for _, want := range []string{
		"  bodies: 0 valid, 13 verified by API key, 0 invalid, 0 not verifiable, 0 pruned\n",
		"  attempt signatures: 0 valid, 14 verified by API key, 0 invalid, 0 not verifiable, 0 pruned\n",
		"  verified by API key: ingest API events carry no provider signature; for each, the API key recorded",
		fmt.Sprintf("             verified: the API key recorded on arrival, %d (", keyID),
		"    first  ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the text has no %q", want)
		}
	}
	if regexp.MustCompile(`[1-9][0-9]* not verifiable|not verifiable \(`).MatchString(out) {
		t.Errorf("an ingest API event reads as not verifiable:\n%s", out)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, tr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"status": "api_key"`, `"api_key": 13,`, `"api_key": 14,`,
		`"event_id": "api-gateway#cus_big_customer_request_0013"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("the JSON has no %s", want)
		}
	}

	// The bundle: its README says the same, per event with what was checked.
	tracer := e.tracer(nil)
	var zip bytes.Buffer
	if err := tracer.Verifier.WriteBundle(&zip, tr); err != nil {
		t.Fatal(err)
	}
	dir := unzip(t, zip.Bytes())
	readme, err := os.ReadFile(filepath.Join(dir, "README.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  bodies: 0 valid, 13 verified by API key, 0 invalid, 0 not verifiable, 0 pruned; hash chain ok",
		"Event 13 of 13: provider api:app, event api-gateway#cus_big_customer_request_0013",
		fmt.Sprintf("              verified: the API key recorded on arrival, %d (", keyID),
		"  no openssl recipe: an ingest API event carries no provider signature to recompute",
	} {
		if !bytes.Contains(readme, []byte(want)) {
			t.Errorf("README.txt has no %q:\n%s", want, readme)
		}
	}
	manifest, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Evidence) != 13 {
		t.Fatalf("%d events in the manifest, want 13", len(m.Evidence))
	}
	for _, ev := range m.Evidence {
		if ev.Verification.Status != APIKey || !strings.Contains(ev.Verification.Detail, "is a stored key of scope \"api:app\"") {
			t.Errorf("%s: %+v", ev.EventID, ev.Verification)
		}
		body, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ev.Body)))
		if err != nil || ev.BodySHA256 != sha256Hex(body) {
			t.Errorf("%s: the body is not the one whose digest was verified (%v)", ev.EventID, err)
		}
	}
}

// An ingest API event whose recorded key the database does not hold stays
// not verifiable, saying why; one whose record names another key is invalid.
func TestIngestEventKeyChecked(t *testing.T) {
	testenv.SQLiteOnly(t, "edits rows in SQLite's dialect")
	for _, c := range []struct{ name, sql, status, text string }{
		// Keys are never deleted: someone dropped the trigger first.
		{"key gone", `DROP TRIGGER api_keys_no_delete; DELETE FROM api_keys`, NotVerifiable, "not verifiable (API key not in the database)"},
		{"another key's prefix", `UPDATE receipts SET signature_headers = 'Hookledger-Api-Key: 1 hl_other' WHERE provider = 'api:app'`, Invalid, "invalid"},
		{"nothing recorded", `UPDATE receipts SET signature_headers = '' WHERE provider = 'api:app'`, NotVerifiable, "not verifiable (no API key recorded)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			seedAPI(t, e)
			e.Exec(c.sql)
			tr := customerTrace(t, e, bigCustomer)
			if v := tr.Events[0].Verification; v.Status != c.status || v.Text != c.text {
				t.Errorf("%+v", v)
			}
			if s := tr.Summary.Bodies; s.APIKey != 0 {
				t.Errorf("bodies %+v", s)
			}
		})
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
