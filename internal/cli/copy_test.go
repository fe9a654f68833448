package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// A SQLite ledger written before mapped properties were held to storable
// text may hold a ledger row PostgreSQL's text refuses (a byte that is not
// UTF-8). copy names that row, its table and column, and says what to do;
// the target stays empty.
func TestCopyNamesARowItCannotMove(t *testing.T) {
	dsn := testenv.PostgresDatabase(t)
	// The source is a SQLite ledger whatever HOOKLEDGER_TEST_BACKEND says.
	e := testenv.New(t, testenv.Options{Backend: "sqlite", NoServer: true})
	at := time.Date(2026, 10, 20, 10, 0, 0, 0, time.UTC)
	for i, props := range []string{`{"model":"gpt"}`, "{\"model\":\"a\xffb\"}"} {
		body := []byte(`{"type":"usage.recorded"}`)
		sum := sha256.Sum256(body)
		// Through the writer, as an older hookledger's mapping let it.
		d := &custody.Delivery{Provider: "default", EventID: []string{"evt_ok", "evt_ff"}[i], EventType: "usage.recorded", Body: body,
			BodySHA256: sum[:], Source: custody.SourceWebhook, HandlerVersion: "old", ReceivedAt: at, Status: custody.StatusApplied,
			Rows: []ledger.UsageRow{{Customer: "cus_1", Meter: "api_requests", Quantity: ledger.TotalOf(1_000_000), OccurredAt: at, Properties: props}}}
		if err := e.Writer.Submit(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	e.Close()

	var out bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &out
	err := app.Run([]string{"hookledger", "copy", "--from", e.Dir, "--to", dsn})
	want := []string{
		`metered_usage row id 2: its properties holds a byte that is not UTF-8 (0xff) at offset 11, which PostgreSQL's text cannot store`,
		"keep serving it from SQLite", "(the target is unchanged)",
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("copy: %v\n%s\nwant it to say %q", err, out.String(), w)
		}
	}
	dst, err := schema.Open(context.Background(), dsn, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	for _, table := range []string{"receipts", "metered_usage"} {
		if n, err := dst.CountRows(context.Background(), table); err != nil || n != 0 {
			t.Errorf("the target's %s: %d rows (%v), want none", table, n, err)
		}
	}
}
