package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// stripe status without --period opens, like every view about closing, on
// the month that just ended while it holds usage and is not closed for all
// customers, and says so; once it is closed, on the current month, and an
// empty table says which month is empty. (The
// test runs on the machine's clock: "last month" is the one before now.)
func TestStripeStatusDefaultsToTheMonthToClose(t *testing.T) {
	e := newCLIEnv(t)
	e.appendConfig(`stripe:
  api_key: sk_test_x
  customers: identity
`)
	// Meter api is pushed to Stripe, when its month's invoice closes.
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("    unit: requests\n"), []byte("    unit: requests\n    stripe: {event_name: api, mode: close}\n"), 1)
	if err := os.WriteFile(e.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	lastMonth := thisMonth.AddDate(0, -1, 0)
	e.write(now, usageEvent{customer: "acme", meter: "api", qty: "7", at: lastMonth.Add(36 * time.Hour)})

	status := func() (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &errOut
		err := app.Run([]string{"hookledger", "stripe", "status", "--config", e.config})
		if err != nil && !strings.Contains(err.Error(), "differ") {
			t.Fatalf("stripe status: %v\n%s%s", err, out.String(), errOut.String())
		}
		return out.String(), errOut.String()
	}
	out, errOut := status()
	if !strings.Contains(out, "acme") || !strings.Contains(out, lastMonth.Format("2006-01")) {
		t.Errorf("stripe status before the last month is closed shows:\n%s\nwant acme's line of %s", out, lastMonth.Format("2006-01"))
	}
	if want := lastMonth.Format("2006-01") + ", the last month, until it is closed (--period " + thisMonth.Format("2006-01") + " for this month)"; !strings.Contains(errOut, want) {
		t.Errorf("stripe status says %q, want %q", errOut, want)
	}

	// Closed for all customers: the current month, without a word.
	ctx := context.Background()
	db, err := schema.Open(ctx, filepath.Join(e.dir, "data", schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ledger.MonthPeriod(lastMonth.Format("2006-01"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := invoice.Close(ctx, db, invoice.CloseRequest{Period: p, All: true, Meters: ledger.NewMeters(nil), Now: func() time.Time { return thisMonth.Add(time.Hour) }}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	out, errOut = status()
	if want := "nothing pushed or to push for " + thisMonth.Format("2006-01"); strings.Contains(out, "acme") || !strings.Contains(errOut, want) || strings.Contains(errOut, "last month") {
		t.Errorf("stripe status once the last month is closed shows:\n%s%s\nwant this month's empty table and %q", out, errOut, want)
	}
}
