package pricing

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Date is a calendar date, "2026-01-01". Plan versions and assignments take
// effect on a date; the ledger compares it with the first day of an invoice's
// period in the period's own time zone, so no instant or zone is needed here.
type Date string

// Check reports a date that is not YYYY-MM-DD.
func (d Date) Check() error {
	if _, err := time.Parse(time.DateOnly, string(d)); err != nil {
		return fmt.Errorf("%q is not a date (YYYY-MM-DD)", clip(string(d)))
	}
	return nil
}

// Plan is one version of a plan: what a customer on it pays from
// EffectiveFrom until the next version of the same name. A version is never
// edited; a change is a new entry with a later date.
type Plan struct {
	Name          string   `yaml:"name" json:"name"`
	Currency      string   `yaml:"currency" json:"currency"`
	EffectiveFrom Date     `yaml:"effective_from" json:"effective_from"`
	Fee           *Decimal `yaml:"fee" json:"fee,omitempty"`         // flat fee per period
	Minimum       *Decimal `yaml:"minimum" json:"minimum,omitempty"` // minimum spend per invoice
	Prices        []Price  `yaml:"prices" json:"prices"`
	// Limits are the version's usage limits (limit.go); not in the snapshot.
	Limits []Limit `yaml:"limits" json:"-"`
	// Spend is the version's spend cap and alerts (spend.go); not in the
	// snapshot either.
	Spend *Spend `yaml:"spend" json:"-"`
	// Unpriced says what the version does with usage of a meter it has no
	// price for: UnpricedFree bills it as a quantity with no amount;
	// UnpricedRefuse (the default) refuses a configuration whose version
	// prices some meters and leaves a declared one out, so a meter left out
	// by mistake is not billed 0.00 in silence. It changes no amount, so
	// it is not in the snapshot either.
	Unpriced string `yaml:"unpriced" json:"-"`

	cur Currency
}

// Validate checks p and resolves its currency. The error starts with the
// key it concerns ("prices[0].tiers[1].up_to: ...").
func (p *Plan) Validate() error {
	if p.Name == "" {
		return fmt.Errorf("name: required")
	}
	cur, err := ParseCurrency(p.Currency)
	if err != nil {
		return fmt.Errorf("currency: %v", err)
	}
	p.cur = cur
	if p.EffectiveFrom == "" {
		return fmt.Errorf("effective_from: required (the date this version starts, YYYY-MM-DD)")
	}
	if err := p.EffectiveFrom.Check(); err != nil {
		return fmt.Errorf("effective_from: %v", err)
	}
	// Fee and minimum are invoice lines of their own, never rounded: they
	// must be whole minor units.
	for _, kv := range []struct {
		key string
		v   *Decimal
	}{{"fee", p.Fee}, {"minimum", p.Minimum}} {
		if kv.v == nil {
			continue
		}
		if err := kv.v.checkConfigured(cur.Decimals()); err != nil {
			return fmt.Errorf("%s: %v (%s has %d)", kv.key, err, cur, cur.Decimals())
		}
	}
	for i := range p.Prices {
		if err := p.Prices[i].Validate(); err != nil {
			return fmt.Errorf("prices[%d].%v", i, err)
		}
		for j := range i {
			if p.Prices[j].Meter == p.Prices[i].Meter {
				return fmt.Errorf("prices[%d].meter: meter %q is priced twice in this version", i, p.Prices[i].Meter)
			}
		}
	}
	for i := range p.Limits {
		if err := p.Limits[i].Validate(); err != nil {
			return fmt.Errorf("limits[%d].%v", i, err)
		}
		for j := range i {
			if p.Limits[j].Meter == p.Limits[i].Meter {
				return fmt.Errorf("limits[%d].meter: meter %q is limited twice in this version", i, p.Limits[i].Meter)
			}
		}
	}
	if p.Spend != nil {
		if err := p.Spend.Validate(cur); err != nil {
			return fmt.Errorf("spend.%v", err)
		}
	}
	switch p.Unpriced {
	case "", UnpricedRefuse, UnpricedFree:
	default:
		return fmt.Errorf("unpriced: %q is not free or refuse (what the version does with usage of a meter it has no price for)", p.Unpriced)
	}
	return nil
}

// What a version does with usage of a meter it has no price for (Plan.Unpriced).
const (
	UnpricedRefuse = "refuse" // the default: every declared meter needs a price
	UnpricedFree   = "free"   // billed as a quantity, no amount
)

// BillsUnpricedFree reports whether the version says usage it does not
// price is free (unpriced: free).
func (p *Plan) BillsUnpricedFree() bool { return p.Unpriced == UnpricedFree }

// CurrencyOf returns the currency Validate resolved.
func (p *Plan) CurrencyOf() Currency { return p.cur }

// Price returns the price of meter in this version, or nil: a meter the
// plan does not price is billed as a quantity with no amount.
func (p *Plan) Price(meter string) *Price {
	for i := range p.Prices {
		if p.Prices[i].Meter == meter {
			return &p.Prices[i]
		}
	}
	return nil
}

// Snapshot is the version's canonical JSON (decimals as strings, keys in
// declaration order) and its SHA-256: what an invoice stores to prove which
// prices made its amounts.
func (p *Plan) Snapshot() ([]byte, [32]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, [32]byte{}, fmt.Errorf("snapshot plan %q: %w", p.Name, err)
	}
	return b, sha256.Sum256(b), nil
}

// ParseSnapshot reads a stored snapshot back into a validated version.
func ParseSnapshot(b []byte) (*Plan, error) {
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("read plan snapshot: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("plan snapshot: %w", err)
	}
	return &p, nil
}

// Settlement is an invoice's money beyond its usage lines.
type Settlement struct {
	Currency string  `json:"currency"`
	Fee      Decimal `json:"fee"`     // the plan's flat fee
	Usage    Decimal `json:"usage"`   // the rounded amounts of the period's own lines
	Late     Decimal `json:"late"`    // the rounded amounts of late lines
	TrueUp   Decimal `json:"true_up"` // minimum − (fee + usage), when that is positive
	Total    Decimal `json:"total"`   // fee + usage + true-up + late
}

// Settle totals an invoice priced with this version. usage are the rounded
// amounts of the period's own lines, late those of late lines (which bill an
// earlier period and so count toward neither this period's minimum nor its
// true-up). Every amount must already be rounded to the plan's currency.
func (p *Plan) Settle(usage, late []Decimal) (Settlement, error) {
	s := Settlement{Currency: p.cur.String()}
	var fee Decimal
	if p.Fee != nil {
		fee = *p.Fee
	}
	var err error
	if s.Fee, err = p.cur.places(fee); err != nil { // Validate allows no finer fee: "29.00", "0.00"
		return Settlement{}, err
	}
	if s.Usage, err = Sum(usage...); err != nil {
		return Settlement{}, err
	}
	if s.Late, err = Sum(late...); err != nil {
		return Settlement{}, err
	}
	spent, err := add(s.Fee, s.Usage)
	if err != nil {
		return Settlement{}, err
	}
	if p.Minimum != nil {
		short, err := sub(*p.Minimum, spent)
		if err != nil {
			return Settlement{}, err
		}
		if short.Sign() > 0 {
			s.TrueUp = short
		}
	}
	if s.TrueUp, err = p.cur.places(s.TrueUp); err != nil {
		return Settlement{}, err
	}
	if s.Total, err = Sum(spent, s.TrueUp, s.Late); err != nil {
		return Settlement{}, err
	}
	// Every part is whole minor units already: the sums are only written
	// with the minor unit's places; nothing here rounds.
	if s.Total, err = p.cur.places(s.Total); err != nil {
		return Settlement{}, err
	}
	if s.Usage, err = p.cur.places(s.Usage); err != nil {
		return Settlement{}, err
	}
	if s.Late, err = p.cur.places(s.Late); err != nil {
		return Settlement{}, err
	}
	return s, nil
}

// Catalog holds every version of every plan.
type Catalog struct {
	versions map[string][]*Plan // by name, in effective order
}

// ErrNoPlan is the outcome of a plan name or date no version covers.
var ErrNoPlan = errors.New("no such plan version")

// NewCatalog indexes validated plan versions. Two versions of one plan on the
// same date are refused: which one applies would be a guess.
func NewCatalog(plans []Plan) (*Catalog, error) {
	c := &Catalog{versions: map[string][]*Plan{}}
	for i := range plans {
		p := &plans[i]
		c.versions[p.Name] = append(c.versions[p.Name], p)
	}
	for name, vs := range c.versions {
		slices.SortStableFunc(vs, func(a, b *Plan) int { return compareDates(a.EffectiveFrom, b.EffectiveFrom) })
		for i := 1; i < len(vs); i++ {
			if vs[i].EffectiveFrom == vs[i-1].EffectiveFrom {
				return nil, fmt.Errorf("plan %q has two versions effective from %s", name, vs[i].EffectiveFrom)
			}
		}
	}
	return c, nil
}

func compareDates(a, b Date) int {
	switch {
	case a < b: // YYYY-MM-DD orders as text
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Has reports whether any version of the plan exists.
func (c *Catalog) Has(name string) bool { return len(c.versions[name]) > 0 }

// Names lists the plans in name order.
func (c *Catalog) Names() []string {
	names := make([]string, 0, len(c.versions))
	for n := range c.versions {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ByDimension reports whether any version prices a meter by a dimension:
// only then do closes read rows' properties to split lines by value.
func (c *Catalog) ByDimension() bool {
	for _, vs := range c.versions {
		for _, v := range vs {
			for i := range v.Prices {
				if v.Prices[i].By != "" {
					return true
				}
			}
		}
	}
	return false
}

// Versions lists a plan's versions in effective order.
func (c *Catalog) Versions(name string) []*Plan { return slices.Clone(c.versions[name]) }

// Version is the version of the plan in force on day: the latest that took
// effect on or before it.
func (c *Catalog) Version(name string, day Date) (*Plan, error) {
	vs := c.versions[name]
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: plan %q is not declared", ErrNoPlan, name)
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if compareDates(vs[i].EffectiveFrom, day) <= 0 {
			return vs[i], nil
		}
	}
	return nil, fmt.Errorf("%w: plan %q has no version in force on %s (its first takes effect on %s)", ErrNoPlan, name, day, vs[0].EffectiveFrom)
}
