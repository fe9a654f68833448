package cli

import (
	"testing"
)

// usage --where "model in ()" is refused, naming the term, instead of
// selecting the rows without the dimension (issue 40, item 9).
func TestUsageWhereRefusesAnEmptyList(t *testing.T) {
	e := newCLIEnv(t)
	e.appendConfig("  - name: tokens\n    unit: tokens\n    dimensions: [model]\n")
	// A row without the model: what the empty list selected.
	e.write(t0("2026-10-20T00:00:00Z"), usageEvent{customer: "c1", meter: "tokens", qty: "5", at: t0("2026-10-05T10:00:00Z")})
	for _, where := range []string{"model in ()", "model not in ( )"} {
		out, err := e.run("usage", "--from", "2026-10", "--to", "2026-11", "--where", where, "--format", "csv")
		want := `--where: "` + where + `": the list is empty: give at least one value, name in (a,b); name= selects rows without the dimension`
		if err == nil || err.Error() != want || out != "" {
			t.Errorf("--where %q: %v, printed %q; want %q", where, err, out, want)
		}
	}
}
