package config

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParsePlans reads a configuration of 1,000 plan versions (100
// plans, 10 versions each, every value a decimal the YAML node is read
// for). Issue 42's target: at most 1 s of CPU; a value read through the
// YAML library's bytes made it grow with the square of the file (220
// versions: 6 s). go test ./config/ -run '^$' -bench ParsePlans -benchtime 3x
func BenchmarkParsePlans(b *testing.B) {
	var y strings.Builder
	y.WriteString(meterProvider + "meters:\n  - name: api\n  - name: tokens\n    dimensions: [model]\nplans:\n")
	for i := range 1000 {
		fmt.Fprintf(&y, `  - name: p%d
    currency: USD
    effective_from: %d-01-01
    fee: "10.00"
    spend: {limit: "1000.00", alerts: ["80%%"]}
    limits: [{meter: api, limit: 1000000, alerts: ["80%%"]}]
    prices:
      - {meter: api, model: graduated, tiers: [{up_to: 1000, unit: "0"}, {up_to: 100000, unit: "0.001"}, {unit: "0.0005"}]}
      - {meter: tokens, model: unit, unit: "0.001"}
`, i%100, 2016+i/100)
	}
	src := []byte(y.String())
	dir := b.TempDir()
	for b.Loop() {
		c, err := Parse(src, dir)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(c.Plans); n != 1000 {
			b.Fatalf("%d versions", n)
		}
	}
}
