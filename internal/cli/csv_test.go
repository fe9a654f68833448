package cli

import (
	"encoding/csv"
	"os"
	"slices"
	"strings"
	"testing"
)

// readCSV parses a command's CSV output into its cells.
func readCSV(t *testing.T, out string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	return rows
}

// usage --format csv and customers list --format csv write a cell that a
// spreadsheet would run as a formula (a customer id, a dimension value, a
// name) with a leading apostrophe, and numbers as they are: a negative
// quantity stays -2.5 (issue 40, item 7).
func TestCSVGuardsFormulaCells(t *testing.T) {
	const link, sum = `=HYPERLINK("http://x","y")`, "@SUM(1)"
	e := newCLIEnv(t)
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append(cfg, "  - name: tokens\n    unit: tokens\n    dimensions: [model]\n"...)
	if err := os.WriteFile(e.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	at := t0("2026-10-05T10:00:00Z")
	e.write(t0("2026-10-20T00:00:00Z"),
		usageEvent{customer: link, meter: "tokens", qty: "5", props: `{"model":"` + strings.ReplaceAll(sum, `"`, `\"`) + `"}`, at: at},
		usageEvent{customer: sum, meter: "tokens", qty: "-2.5", props: `{"model":"=HYPERLINK(\"http://x\",\"y\")"}`, at: at},
	)
	got := readCSV(t, e.mustRun("usage", "--from", "2026-10", "--to", "2026-11", "--group-by", "customer,meter,model", "--format", "csv"))
	want := [][]string{
		{"customer", "meter", "model", "aggregation", "quantity", "unit", "events", "adjustments"},
		{"'" + link, "tokens", "'" + sum, "sum", "5", "tokens", "1", "0"},
		{"'" + sum, "tokens", "'" + link, "sum", "-2.5", "tokens", "1", "0"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("usage CSV:\n%q\nwant\n%q", got, want)
	}

	// customers add takes --config after its own name.
	app := newApp()
	app.Writer, app.ErrWriter = new(strings.Builder), new(strings.Builder)
	if err := app.Run([]string{"hookledger", "customers", "add", "--config", e.config, "--name", sum, "--email", "-x@example.test", link}); err != nil {
		t.Fatal(err)
	}
	got = readCSV(t, e.mustRun("customers", "list", "--format", "csv"))
	if len(got) != 2 {
		t.Fatalf("customers CSV: %q", got)
	}
	// No external ids, no plan: the CLI's "-" for an empty value is no formula and stays.
	if want := []string{"'" + link, "'" + sum, "'-x@example.test", "-", "-"}; !slices.Equal(got[1][:5], want) {
		t.Errorf("customers CSV row: %q, want %q", got[1][:5], want)
	}
}
