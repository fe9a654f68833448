package config

import (
	"strings"
	"testing"
	"time"
)

func TestInvoicingParse(t *testing.T) {
	c, err := Parse([]byte(meterProvider+"invoicing:\n  close: monthly\n  tz: Europe/Berlin\n  grace: 72h\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in := c.Invoicing
	if !in.Enabled() || in.Close != InvoicingMonthly || in.Location.String() != "Europe/Berlin" || in.Grace.Duration != 72*time.Hour {
		t.Errorf("invoicing %+v", in)
	}
	// Defaults: UTC and the default grace; days work as everywhere.
	c, err = Parse([]byte(meterProvider+"invoicing:\n  close: monthly\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if in := c.Invoicing; in.TZ != "UTC" || in.Location != time.UTC || in.Grace.Duration != DefaultInvoicingGrace {
		t.Errorf("defaults %+v", in)
	}
	c, err = Parse([]byte(meterProvider+"invoicing:\n  close: monthly\n  grace: 2d\n"), t.TempDir())
	if err != nil || c.Invoicing.Grace.Duration != 48*time.Hour {
		t.Errorf("grace 2d: %v %+v", err, c.Invoicing)
	}
	// A zone without a schedule: periods are closed by hand, in that zone.
	c, err = Parse([]byte(meterProvider+"invoicing:\n  tz: Europe/Berlin\n"), t.TempDir())
	if err != nil || c.Invoicing.Enabled() || c.Invoicing.TZ != "Europe/Berlin" || c.Invoicing.Location.String() != "Europe/Berlin" {
		t.Errorf("tz without close: %v %+v", err, c.Invoicing)
	}
	// Absent is off.
	c, err = Parse([]byte(meterProvider), t.TempDir())
	if err != nil || c.Invoicing.Enabled() {
		t.Errorf("no invoicing section: %v %+v", err, c.Invoicing)
	}
}

// Every mistake names its line and key; the line numbers count from the
// provider's four lines.
func TestInvoicingRefused(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"invoicing:\n  close: weekly\n", `6: invoicing.close: "weekly" is not a schedule: want monthly`},
		{"invoicing:\n  close: Monthly\n", `6: invoicing.close: "Monthly" is not a schedule`},
		{"invoicing:\n  close: monthly\n  tz: Mars/Olympus\n", `7: invoicing.tz: time zone "Mars/Olympus" is not an IANA zone name`},
		{"invoicing:\n  close: monthly\n  tz: Local\n", `7: invoicing.tz: time zone "Local": name an IANA zone`},
		{"invoicing:\n  close: monthly\n  grace: soon\n", `7: invoicing.grace: invalid duration "soon"`},
		{"invoicing:\n  close: monthly\n  grace: -1h\n", `7: invoicing.grace: must not be negative`},
		{"invoicing:\n  close: monthly\n  grace: [1h]\n", `7: invoicing.grace: want a duration`},
		{"invoicing:\n  tz: Mars/Olympus\n", `6: invoicing.tz: time zone "Mars/Olympus" is not an IANA zone name`},
		{"invoicing:\n  grace: 1h\n", `6: invoicing.close: required with grace`},
		{"invoicing:\n  close: monthly\n  timezone: UTC\n", `7: invoicing.timezone: unknown field`},
	} {
		_, err := Parse([]byte(meterProvider+c.yaml), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}
