package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// Customers is the customers section: what applies to a customer the
// registry says nothing about.
type Customers struct {
	// DefaultPlan prices every customer without a plan assignment in force
	// for the period; empty, such a customer's invoice has quantities only.
	DefaultPlan string `yaml:"default_plan"`
}

// resolvePlans validates every plan version and the default plan, and
// builds Catalog. A price must name a declared meter: an undeclared name is
// almost always a typo, and a typo would bill nothing.
func (c *Config) resolvePlans() error {
	declared := map[string]bool{}
	aggregation := map[string]ledger.Aggregation{}
	dimensions := map[string][]string{}
	for _, m := range c.Meters {
		declared[m.Name] = true
		aggregation[m.Name] = m.Aggregation
		dimensions[m.Name] = m.Dimensions
	}
	for i := range c.Plans {
		at := fmt.Sprintf("plans[%d]", i)
		p := &c.Plans[i]
		if err := p.Validate(); err != nil {
			key, msg, _ := strings.Cut(err.Error(), ": ")
			return errAt(at+"."+key, "%s", msg)
		}
		for j, pr := range p.Prices {
			if !declared[pr.Meter] {
				return errAt(fmt.Sprintf("%s.prices[%d].meter", at, j), "meter %q is not declared under meters (declare it, with its aggregation, to price it)", pr.Meter)
			}
			// Spend is priced from the month's sum of each priced meter
			// (the usage state), which is the invoice's quantity only for
			// a sum meter.
			if agg := aggregation[pr.Meter]; p.Spend != nil && spendPriceable(&pr, agg) == "meter" {
				return errAt(fmt.Sprintf("%s.prices[%d].meter", at, j), "meter %q aggregates by %s: a plan version with spend prices only sum meters (spend is priced from each meter's month total)", pr.Meter, agg)
			}
			// A price by dimension splits the meter's usage by a value its
			// rows carry: the mappings extract only declared dimensions.
			if ds := dimensions[pr.Meter]; pr.By != "" && !slices.Contains(ds, pr.By) {
				have := "it declares none"
				if len(ds) > 0 {
					have = "it declares " + strings.Join(ds, ", ")
				}
				return errAt(fmt.Sprintf("%s.prices[%d].by", at, j), "%q is not a dimension of meter %q (%s; add it under the meter's dimensions)", pr.By, pr.Meter, have)
			}
			// Spend is priced from the usage state, one total per meter: a
			// price by dimension would need each value's own total.
			if p.Spend != nil && spendPriceable(&pr, aggregation[pr.Meter]) == "by" {
				return errAt(fmt.Sprintf("%s.prices[%d].by", at, j), "a plan version with spend cannot price meter %q by %s yet: spend is priced from each meter's month total, not each value's (drop spend from this version, or price the meter without by)", pr.Meter, pr.By)
			}
		}
		// A version that prices anything prices every declared meter, or
		// says its other usage is free: a meter left out by mistake would
		// otherwise be billed 0.00 in silence.
		if len(p.Prices) > 0 && !p.BillsUnpricedFree() {
			for _, m := range c.Meters {
				if p.Price(m.Name) == nil {
					return errAt(at+".prices", "plan %q from %s has no price for meter %q: price it, or add unpriced: free to the version to bill usage it does not price as a quantity with no amount",
						p.Name, p.EffectiveFrom, m.Name)
				}
			}
		}
		// A limit is on the period's sum: the total the writer keeps per
		// customer, meter and month (entitlements).
		for j, l := range p.Limits {
			key := fmt.Sprintf("%s.limits[%d].meter", at, j)
			switch agg, ok := aggregation[l.Meter]; {
			case !ok:
				return errAt(key, "meter %q is not declared under meters (declare it to limit it)", l.Meter)
			case agg != "" && agg != ledger.AggSum:
				return errAt(key, "meter %q aggregates by %s: limits apply to sum meters", l.Meter, agg)
			}
		}
	}
	catalog, err := pricing.NewCatalog(c.Plans)
	if err != nil {
		return errAt("plans", "%v", err)
	}
	c.Catalog = catalog
	if d := c.Customers.DefaultPlan; d != "" && !catalog.Has(d) {
		return errAt("customers.default_plan", "no plan named %q under plans", d)
	}
	return nil
}

// spendPriceable is the key of price pr (of a meter aggregating by agg)
// that keeps spend from being priced from the usage state, one total per
// customer, meter and month ("" when none does): "meter" for a meter that
// does not aggregate by sum (the month's sum is not its invoice quantity),
// "by" for a price by dimension (it needs each value's total). Spend, a
// limit of kind credit and the credit alerts price a month so.
func spendPriceable(pr *pricing.Price, agg ledger.Aggregation) string {
	switch {
	case agg != "" && agg != ledger.AggSum:
		return "meter"
	case pr.By != "":
		return "by"
	}
	return ""
}
