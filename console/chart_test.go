package console

import (
	"testing"

	"github.com/hookledger/hookledger/ledger"
)

// Days of 10 TB and more draw bars from scaled values, and the y axis
// labels multiply back exactly.
func TestChartValuesOfWideQuantities(t *testing.T) {
	parse := func(s string) ledger.Total {
		v, err := ledger.ParseTotal(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	values, yText := chartValues([]ledger.Total{parse("10000000000000000"), parse("5000000000000000"), parse("0")})
	if values[0] != 2*values[1] || values[2] != 0 || values[0] > 1_000_000_000_000_000 {
		t.Fatalf("values %v", values)
	}
	if got := yText(values[0]); got != "10000000000000000" {
		t.Fatalf("y label of the top bar: %s", got)
	}
	small, yText := chartValues([]ledger.Total{parse("2.5")})
	if small[0] != 2_500_000 || yText(small[0]) != "2.5" {
		t.Fatalf("ordinary quantities: %v %s", small, yText(small[0]))
	}
}
