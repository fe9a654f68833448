package cli

import (
	"fmt"
	"testing"
)

// A correction's dry run shows the money beside the change when a plan
// prices it, exactly, and writes nothing, for one event and in bulk. c1
// used 150,001 + 500 requests in October: 99,000 × 0.001 + 50,501 × 0.0005 =
// 124.2505. Voiding the 150,001 leaves 500, which is free: −124.2505.
func TestCorrectionDryRunsShowMoney(t *testing.T) {
	e := newCLIEnv(t)
	e.appendConfig(proPlan)
	recorded := t0("2026-10-20T00:00:00Z")
	e.write(recorded,
		usageEvent{customer: "c1", meter: "api", qty: "150001", at: t0("2026-10-03T10:00:00Z")},
		usageEvent{customer: "c1", meter: "api", qty: "500", at: t0("2026-10-04T10:00:00Z")},
	)
	first := fmt.Sprintf("evt_%d_0", recorded.UnixNano()) // cliEnv.write's ids
	out := e.mustRun("void", "test", first, "--reason", "load test", "--actor", "ana", "--dry-run", "--format", "csv")
	if want := "customer,meter,period,before,after,change,money,currency\nc1,api,2026-10,150001,0,-150001,-124.2505000000,USD\n"; out != want {
		t.Errorf("void --dry-run:\n%s\nwant\n%s", out, want)
	}
	out = e.mustRun("void", "--provider", "test", "--from", "2026-10-01", "--to", "2026-11-01", "--reason", "load test", "--actor", "ana", "--dry-run", "--format", "csv")
	if want := "customer,meter,period,before,after,change,money,currency\nc1,api,2026-10,150501,0,-150501,-124.2505000000,USD\n"; out != want {
		t.Errorf("bulk void --dry-run:\n%s\nwant\n%s", out, want)
	}
	if n := e.count(`SELECT COUNT(*) FROM metered_usage WHERE kind = 'void'`); n != 0 {
		t.Errorf("the dry runs wrote %d void rows", n)
	}
}
