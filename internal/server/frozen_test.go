package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/invoice"
)

// serve refuses to start on a configuration that edited, in place, a plan
// version a closed invoice was priced with (issue 40, item 5): October
// closed with pro@2026-01-01 at 0.01 EUR a request; the same version at
// 0.02 would price late October usage under the same label at another
// price. The error names the plan, its date and the invoice, and says to
// add a new version instead; with the change as a new version, serve opens.
func TestServeRefusesAnEditedPlanVersion(t *testing.T) {
	e := newSchedEnv(t, "sqlite", "UTC")
	e.at("2026-11-20T00:00:00Z")
	e.use("cus_1", 100, "2026-10-10T10:00:00Z")
	e.scheduler(e.met.WatchInvoicing()).check(context.Background())
	equal(t, "invoices", e.invoices(), []string{"2026-10 cus_1 11.00 EUR"})
	e.Close()

	dir := filepath.Dir(e.Config.Data)
	open := func(plans string) error {
		t.Helper()
		yml := strings.Replace(fmt.Sprintf(invoicingConfig, e.Config.Data, "UTC"), `      - {meter: api_requests, model: unit, unit: "0.01"}
`, plans, 1)
		path := filepath.Join(dir, "edited.yml")
		if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listen = "127.0.0.1:0"
		s := &Server{Config: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Banner: io.Discard}
		err = s.Open(context.Background())
		s.Close()
		return err
	}
	err := open(`      - {meter: api_requests, model: unit, unit: "0.02"}
`)
	if !errors.Is(err, invoice.ErrFrozenVersion) || !strings.Contains(err.Error(), `plan "pro" version 2026-01-01`) ||
		!strings.Contains(err.Error(), "invoice 1") || !strings.Contains(err.Error(), "a later effective_from") {
		t.Fatalf("serve with pro@2026-01-01 edited: %v", err)
	}
	if err := open(`      - {meter: api_requests, model: unit, unit: "0.01"}
  - name: pro
    currency: EUR
    effective_from: 2026-12-01
    fee: "10.00"
    prices:
      - {meter: api_requests, model: unit, unit: "0.02"}
`); err != nil {
		t.Fatalf("serve with the change as a new version: %v", err)
	}
}
