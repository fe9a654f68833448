package cli

import (
	"bytes"
	"strings"
	"testing"
)

// usage stranded lists, and only once a period is closed, the usage dated
// before the first close: here a row of 1971 and one of August, after
// September was closed for all customers.
func TestUsageStranded(t *testing.T) {
	e := newCLIEnv(t)
	stranded := func() string {
		t.Helper()
		var out bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &out
		if err := app.Run([]string{"hookledger", "usage", "stranded", "--config", e.config, "--format", "csv"}); err != nil {
			t.Fatalf("usage stranded: %v\n%s", err, out.String())
		}
		return out.String()
	}
	e.write(t0("2026-10-02T00:00:00Z"),
		usageEvent{customer: "c1", meter: "api", qty: "5", at: t0("1971-01-01T00:00:00Z")},
		usageEvent{customer: "c1", meter: "api", qty: "10", at: t0("2026-09-03T10:00:00Z")})
	header := "customer,meter,month,tz,sum,events,adjustments,first_closed,min_id,max_id\n"
	if got := stranded(); got != header {
		t.Fatalf("before any close:\n%s", got)
	}
	e.mustRun("invoice", "close", "--period", "2026-09", "--all")
	e.write(t0("2026-10-03T00:00:00Z"), usageEvent{customer: "c2", meter: "api", qty: "2", at: t0("2026-08-31T23:00:00Z")})
	want := header + "c1,api,1971-01,UTC,5,1,0,2026-09,1,1\nc2,api,2026-08,UTC,2,1,0,2026-09,3,3\n"
	if got := stranded(); got != want {
		t.Fatalf("after closing September:\n%s\nwant\n%s", got, want)
	}
	if late := e.mustRun("usage", "late", "--format", "csv"); strings.Count(late, "\n") != 1 {
		t.Errorf("stranded usage is not late usage:\n%s", late)
	}
}
