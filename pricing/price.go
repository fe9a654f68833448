package pricing

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Model is how a price turns a period's quantity into an amount.
type Model string

// The price models.
const (
	// Unit: quantity × unit.
	Unit Model = "unit"
	// Graduated: each tier prices the units that fall in it, and a tier's
	// flat amount is charged once usage enters the tier (Stripe's
	// tiers_mode=graduated).
	Graduated Model = "graduated"
	// Volume: the tier the whole quantity falls in prices every unit, plus
	// that tier's flat amount (Stripe's tiers_mode=volume).
	Volume Model = "volume"
	// Package: amount per started package of size units, after free units.
	Package Model = "package"
)

// Models lists the models in documentation order.
var Models = []Model{Unit, Graduated, Volume, Package}

// Tier is one step of a graduated or volume price. UpTo is inclusive (a
// volume quantity of exactly UpTo is priced by this tier); the last tier has
// none and takes every quantity above the one before.
type Tier struct {
	UpTo *Decimal `yaml:"up_to" json:"up_to,omitempty"`
	Unit Decimal  `yaml:"unit" json:"unit"`
	Flat *Decimal `yaml:"flat" json:"flat,omitempty"`
}

// Price prices one meter. Which fields apply depends on Model: Unit for
// unit; Tiers for graduated and volume; Size, Amount and Free for package.
//
// A price by dimension (By, e.g. model) has no model of its own: it holds
// one rate card per value of the dimension (Rates) and optionally a Default
// for every other value, each card a price of its own model. The meter's
// usage is then billed per value, each value's quantity priced by its card
// alone (so tiers count each value's own quantity). A value with no card and
// no default is refused when it is billed, never priced 0. The new fields
// are left out of the JSON when unset, so the snapshot of a plan without
// them is what it was before prices by dimension existed.
type Price struct {
	Meter  string   `yaml:"meter" json:"meter"`
	Model  Model    `yaml:"model" json:"model"`
	Unit   *Decimal `yaml:"unit" json:"unit,omitempty"`
	Tiers  []Tier   `yaml:"tiers" json:"tiers,omitempty"`
	Size   *Decimal `yaml:"size" json:"size,omitempty"`
	Amount *Decimal `yaml:"amount" json:"amount,omitempty"`
	Free   *Decimal `yaml:"free" json:"free,omitempty"`

	By      string            `yaml:"by" json:"by,omitempty"`           // the dimension the price varies by
	Rates   map[string]*Price `yaml:"rates" json:"rates,omitempty"`     // a card per value of By (JSON: keys sorted)
	Default *Price            `yaml:"default" json:"default,omitempty"` // the card of every other value
}

// Card is the rate card that prices value of p's dimension: its own, else
// the default; nil when there is neither. p must have a dimension (By).
func (p *Price) Card(value string) *Price {
	if c, ok := p.Rates[value]; ok {
		return c
	}
	return p.Default
}

// validateCards checks a price by dimension: it takes its models in its
// cards only, and each card is a price of its own (of the same meter, with
// no dimension of its own).
func (p *Price) validateCards() error {
	if keys := p.setKeys(); p.Model != "" || len(keys) > 0 {
		what := "model"
		if p.Model == "" {
			what = keys[0]
		}
		return fmt.Errorf("%s: a price by %s takes its model in each rate card (rates: {VALUE: {model: unit, unit: \"0.01\"}}, default: {...})", what, p.By)
	}
	if len(p.Rates) == 0 && p.Default == nil {
		return fmt.Errorf("rates: a price by %s needs a rate card per value (rates: {VALUE: {model: ...}}) or a default", p.By)
	}
	check := func(key string, c *Price) error {
		if c == nil {
			return fmt.Errorf("%s: a rate card needs a model", key)
		}
		if c.Meter != "" && c.Meter != p.Meter {
			return fmt.Errorf("%s.meter: a rate card prices its price's meter %q; leave meter out", key, p.Meter)
		}
		if c.By != "" || c.Rates != nil || c.Default != nil {
			return fmt.Errorf("%s: a rate card is priced by one model; it cannot vary by a dimension itself", key)
		}
		c.Meter = p.Meter // for the errors of its charges
		if err := c.Validate(); err != nil {
			return fmt.Errorf("%s.%v", key, err)
		}
		return nil
	}
	for _, v := range slices.Sorted(maps.Keys(p.Rates)) {
		if err := check("rates."+v, p.Rates[v]); err != nil {
			return err
		}
	}
	if p.Default != nil {
		return check("default", p.Default)
	}
	return nil
}

// Validate checks p for its model. The error starts with the key it
// concerns ("tiers[1].up_to: ...").
func (p *Price) Validate() error {
	if p.Meter == "" {
		return fmt.Errorf("meter: required")
	}
	if p.By != "" {
		return p.validateCards()
	}
	if p.Rates != nil || p.Default != nil {
		key := "rates"
		if p.Rates == nil {
			key = "default"
		}
		return fmt.Errorf("%s: rate cards need by: the dimension they vary by (e.g. by: model)", key)
	}
	var allowed []string
	switch p.Model {
	case Unit:
		if p.Unit == nil {
			return fmt.Errorf("unit: a unit price needs unit (e.g. unit: \"0.001\")")
		}
		if err := p.Unit.checkConfigured(MaxDecimals); err != nil {
			return fmt.Errorf("unit: %v", err)
		}
		allowed = []string{"unit"}
	case Graduated, Volume:
		if err := validateTiers(p.Tiers); err != nil {
			return err
		}
		allowed = []string{"tiers"}
	case Package:
		if p.Size == nil || p.Amount == nil {
			return fmt.Errorf("size: a package price needs size and amount (e.g. size: 100, amount: \"5.00\")")
		}
		if err := p.Size.checkConfigured(6); err != nil {
			return fmt.Errorf("size: %v", err)
		}
		if p.Size.Sign() == 0 {
			return fmt.Errorf("size: must be more than 0")
		}
		if err := p.Amount.checkConfigured(MaxDecimals); err != nil {
			return fmt.Errorf("amount: %v", err)
		}
		if p.Free != nil {
			if err := p.Free.checkConfigured(6); err != nil {
				return fmt.Errorf("free: %v", err)
			}
		}
		allowed = []string{"size", "amount", "free"}
	default:
		names := make([]string, len(Models))
		for i, m := range Models {
			names[i] = string(m)
		}
		return fmt.Errorf("model: %q is not one of %s", p.Model, strings.Join(names, ", "))
	}
	for _, k := range p.setKeys() {
		if !contains(allowed, k) {
			return fmt.Errorf("%s: a %s price does not take %s (it takes %s)", k, p.Model, k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

func (p *Price) setKeys() []string {
	var keys []string
	for _, kv := range []struct {
		key string
		set bool
	}{{"unit", p.Unit != nil}, {"tiers", p.Tiers != nil}, {"size", p.Size != nil}, {"amount", p.Amount != nil}, {"free", p.Free != nil}} {
		if kv.set {
			keys = append(keys, kv.key)
		}
	}
	return keys
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func validateTiers(tiers []Tier) error {
	if len(tiers) == 0 {
		return fmt.Errorf("tiers: at least one tier, the last without up_to")
	}
	var prev *Decimal
	for i, t := range tiers {
		at := fmt.Sprintf("tiers[%d]", i)
		last := i == len(tiers)-1
		switch {
		case last && t.UpTo != nil:
			return fmt.Errorf("%s.up_to: the last tier takes every quantity above the one before; leave out up_to", at)
		case !last && t.UpTo == nil:
			return fmt.Errorf("%s.up_to: required on every tier but the last", at)
		}
		if t.UpTo != nil {
			if err := t.UpTo.checkConfigured(6); err != nil {
				return fmt.Errorf("%s.up_to: %v", at, err)
			}
			if t.UpTo.Sign() == 0 {
				return fmt.Errorf("%s.up_to: must be more than 0", at)
			}
			if prev != nil && t.UpTo.Cmp(*prev) <= 0 {
				return fmt.Errorf("%s.up_to: %s is not above the previous tier's %s (tiers go in increasing order)", at, t.UpTo, prev)
			}
			prev = t.UpTo
		}
		if err := t.Unit.checkConfigured(MaxDecimals); err != nil {
			return fmt.Errorf("%s.unit: %v", at, err)
		}
		if t.Flat != nil {
			if err := t.Flat.checkConfigured(MaxDecimals); err != nil {
				return fmt.Errorf("%s.flat: %v", at, err)
			}
		}
	}
	return nil
}

// Charge is what a price makes of one quantity: the exact, unrounded
// amount and how it was reached.
type Charge struct {
	Quantity Decimal      `json:"quantity"`
	Amount   Decimal      `json:"amount"`
	Tiers    []TierCharge `json:"tiers,omitempty"`    // graduated and volume: each tier that priced units
	Packages *Decimal     `json:"packages,omitempty"` // package: packages billed
}

// TierCharge is one tier's share of a graduated or volume charge.
type TierCharge struct {
	Tier     int     `json:"tier"` // index into the price's tiers, from 0
	Quantity Decimal `json:"quantity"`
	Unit     Decimal `json:"unit"`
	Flat     Decimal `json:"flat"`
	Amount   Decimal `json:"amount"`
}

// Charge prices quantity q exactly. Under the unit model the amount is
// q × unit for any q, so a negative total is a credit; the other models
// charge nothing for a quantity of zero or less. p must have passed Validate.
func (p *Price) Charge(q Decimal) (Charge, error) {
	c := Charge{Quantity: q}
	var err error
	switch p.Model {
	case Unit:
		c.Amount, err = mul(q, *p.Unit)
	case Graduated:
		c.Tiers, c.Amount, err = graduated(p.Tiers, q)
	case Volume:
		c.Tiers, c.Amount, err = volume(p.Tiers, q)
	case Package:
		var n Decimal
		n, c.Amount, err = packages(p, q)
		c.Packages = &n
	default:
		err = fmt.Errorf("model %q", p.Model)
	}
	if err != nil {
		return Charge{}, fmt.Errorf("price %s of meter %q: %w", q, p.Meter, err)
	}
	return c, nil
}

func tierCharge(i int, t Tier, n Decimal) (TierCharge, error) {
	tc := TierCharge{Tier: i, Quantity: n, Unit: t.Unit}
	if t.Flat != nil {
		tc.Flat = *t.Flat
	}
	units, err := mul(n, t.Unit)
	if err != nil {
		return TierCharge{}, err
	}
	tc.Amount, err = add(units, tc.Flat)
	return tc, err
}

// graduated prices the units in each tier q reaches: tier i takes the units
// in (UpTo of tier i-1, UpTo of tier i].
func graduated(tiers []Tier, q Decimal) ([]TierCharge, Decimal, error) {
	var out []TierCharge
	var total, lower Decimal
	for i, t := range tiers {
		if q.Cmp(lower) <= 0 {
			break
		}
		upper := q
		if t.UpTo != nil {
			upper = minDecimal(q, *t.UpTo)
		}
		n, err := sub(upper, lower)
		if err != nil {
			return nil, Decimal{}, err
		}
		tc, err := tierCharge(i, t, n)
		if err != nil {
			return nil, Decimal{}, err
		}
		if total, err = add(total, tc.Amount); err != nil {
			return nil, Decimal{}, err
		}
		out = append(out, tc)
		if t.UpTo != nil {
			lower = *t.UpTo
		}
	}
	return out, total, nil
}

// volume prices all of q at the first tier whose UpTo is at least q.
func volume(tiers []Tier, q Decimal) ([]TierCharge, Decimal, error) {
	if q.Sign() <= 0 {
		return nil, Decimal{}, nil
	}
	for i, t := range tiers {
		if t.UpTo == nil || q.Cmp(*t.UpTo) <= 0 {
			tc, err := tierCharge(i, t, q)
			if err != nil {
				return nil, Decimal{}, err
			}
			return []TierCharge{tc}, tc.Amount, nil
		}
	}
	return nil, Decimal{}, fmt.Errorf("no tier takes %s (the last tier must be open-ended)", q)
}

// packages charges Amount per started package of Size units after Free
// units: with size 100 and 100 free, 201 units are two packages.
func packages(p *Price, q Decimal) (n, amount Decimal, err error) {
	billable := q
	if p.Free != nil {
		if billable, err = sub(q, *p.Free); err != nil {
			return Decimal{}, Decimal{}, err
		}
	}
	if billable.Sign() <= 0 {
		return Decimal{}, Decimal{}, nil
	}
	if n, err = ceilQuo(billable, *p.Size); err != nil {
		return Decimal{}, Decimal{}, err
	}
	amount, err = mul(n, *p.Amount)
	return n, amount, err
}

// Margin is what a price adds when a period's total moves from before to
// after: Charge(after) − Charge(before). A regular invoice line is the margin
// from zero; a late line the margin from what the period's invoices already
// billed, so graduated and volume tiers come out right however usage
// arrives.
type Margin struct {
	Before Charge  `json:"before"`
	After  Charge  `json:"after"`
	Amount Decimal `json:"amount"` // exact, unrounded
	// Carry is set on a late line priced to carry its period's rounding
	// (carry.go); nil on a period's own line and on late lines closed
	// before carrying, whose amount is Amount rounded on its own.
	Carry *Carry `json:"carry,omitempty"`
}

// Margin prices the move from before to after.
func (p *Price) Margin(before, after Decimal) (Margin, error) {
	var m Margin
	var err error
	if m.After, err = p.Charge(after); err != nil {
		return Margin{}, err
	}
	if before.Sign() != 0 {
		if m.Before, err = p.Charge(before); err != nil {
			return Margin{}, err
		}
	}
	if m.Amount, err = sub(m.After.Amount, m.Before.Amount); err != nil {
		return Margin{}, fmt.Errorf("price meter %q: %w", p.Meter, err)
	}
	return m, nil
}

// AppendJSON appends m's JSON, byte for byte what encoding/json makes of it
// (TestMarginAppendJSONIsJSONMarshal): a close stores one per invoice line,
// and encoding/json's reflection was a fifth of the pricing's cost.
func (m Margin) AppendJSON(b []byte) []byte {
	b = append(b, `{"before":`...)
	b = m.Before.appendJSON(b)
	b = append(b, `,"after":`...)
	b = m.After.appendJSON(b)
	b = append(b, `,"amount":`...)
	b = m.Amount.appendJSON(b)
	if m.Carry != nil {
		b = append(b, `,"carry":{"total":`...)
		b = m.Carry.Total.appendJSON(b)
		b = append(b, `,"billed":`...)
		b = m.Carry.Billed.appendJSON(b)
		b = append(b, '}')
	}
	return append(b, '}')
}

func (c *Charge) appendJSON(b []byte) []byte {
	b = append(b, `{"quantity":`...)
	b = c.Quantity.appendJSON(b)
	b = append(b, `,"amount":`...)
	b = c.Amount.appendJSON(b)
	if len(c.Tiers) > 0 {
		b = append(b, `,"tiers":[`...)
		for i := range c.Tiers {
			if i > 0 {
				b = append(b, ',')
			}
			b = c.Tiers[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	if c.Packages != nil {
		b = append(b, `,"packages":`...)
		b = c.Packages.appendJSON(b)
	}
	return append(b, '}')
}

func (t *TierCharge) appendJSON(b []byte) []byte {
	b = append(b, `{"tier":`...)
	b = strconv.AppendInt(b, int64(t.Tier), 10)
	b = append(b, `,"quantity":`...)
	b = t.Quantity.appendJSON(b)
	b = append(b, `,"unit":`...)
	b = t.Unit.appendJSON(b)
	b = append(b, `,"flat":`...)
	b = t.Flat.appendJSON(b)
	b = append(b, `,"amount":`...)
	b = t.Amount.appendJSON(b)
	return append(b, '}')
}
