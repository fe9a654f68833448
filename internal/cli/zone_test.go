package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// With invoicing.tz set (and no schedule), every command reads months in
// that zone unless --tz says otherwise: a manual close of November after
// October's closes the same zone's November, so the event at 2026-10-31
// 23:30Z (November 1, 00:30 in Berlin) is on November's invoice, and a close
// in UTC that would leave the hour between the zones unbilled is refused.
func TestCommandsReadPeriodsInTheConfiguredZone(t *testing.T) {
	e := newCLIEnv(t)
	e.appendConfig("invoicing:\n  tz: Europe/Berlin\n")
	e.write(t0("2026-11-01T00:10:00Z"),
		usageEvent{customer: "c1", meter: "api", qty: "7", at: t0("2026-10-31T23:30:00Z")},
		usageEvent{customer: "c1", meter: "api", qty: "1", at: t0("2026-10-05T00:00:00Z")})

	// usage of "2026-11" is Berlin's November.
	out := e.mustRun("usage", "--from", "2026-11", "--to", "2026-12", "--format", "json")
	if !strings.Contains(out, `"quantity": "7"`) || strings.Contains(out, `"quantity": "8"`) {
		t.Errorf("usage --from 2026-11 without --tz does not read Berlin's November:\n%s", out)
	}
	e.mustRun("invoice", "close", "--period", "2026-10", "--all")
	// The same close in UTC would leave 23:00Z to 24:00Z on October 31 between
	// the zones: refused, naming both, and nothing is stored.
	out, err := e.run("invoice", "close", "--period", "2026-11", "--all", "--tz", "UTC")
	if err == nil {
		t.Fatalf("a close in UTC beside October closed in Berlin was accepted:\n%s", out)
	}
	for _, want := range []string{"2026-10-31T23:00:00Z to 2026-11-01T00:00:00Z", "2026-10 in Europe/Berlin for all customers (close 1)", "--tz Europe/Berlin"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q: %v", want, err)
		}
	}
	if n := e.count(`SELECT COUNT(*) FROM period_closes`); n != 1 {
		t.Fatalf("the refused close stored something: %d closes", n)
	}
	out = e.mustRun("invoice", "close", "--period", "2026-11", "--all", "--format", "json")
	var res struct {
		Invoices []struct {
			TZ    string `json:"tz"`
			Lines []struct {
				Quantity string `json:"quantity"`
			} `json:"lines"`
		} `json:"invoices"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(res.Invoices) != 1 || res.Invoices[0].TZ != "Europe/Berlin" || len(res.Invoices[0].Lines) != 1 || res.Invoices[0].Lines[0].Quantity != "7" {
		t.Fatalf("November's invoice, closed without --tz: %s", out)
	}
	if out, err := e.run("verify"); err != nil {
		t.Errorf("verify: %v\n%s", err, out)
	}
}
