package invoice

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// Prices by dimension (pricing.Price.By). When the plan version that prices
// a customer's period bills a meter by a dimension, the close writes one
// invoice line per value of that dimension instead of one per meter: each
// line covers only the rows of its value, its quantity is that value's
// aggregate, and its amount is priced by the value's rate card at the
// margin from that value's own billed total. So tiers apply to each value's
// own quantity: 200,000 gpt-4o-mini tokens on a graduated card climb that
// card's tiers whatever gpt-4o used. Late usage and voids of a closed period
// are billed the same way, one late line per value that changed.
//
// A line holds its values as canonical JSON, {"model":"gpt-4o"} (the empty
// value is {"model":""}, rows without the property), in
// invoice_lines.dimensions (migration 0022); an ordinary line holds "".
// Verify reads a line's rows back through the same filter.

// splitter says which dimension, if any, a customer's meter is billed by in
// the period [start, end) (in zone tz): the price's By in the plan version
// that prices it (for late usage of a closed period, the version that priced
// that period: pricer.lateVersion). nil: nothing is split.
type splitter func(customer, meter string, start, end int64, tz string, late bool) (string, error)

// dimensionsOf is the canonical JSON of one dimension's value on a line.
func dimensionsOf(name, value string) string {
	b, _ := json.Marshal(map[string]string{name: value}) // a map's keys are sorted: canonical
	return string(b)
}

// lineDimension reads a line's dimension back: name "" for an ordinary line.
func lineDimension(dims string) (name, value string, err error) {
	if dims == "" {
		return "", "", nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(dims), &m); err != nil || len(m) != 1 {
		return "", "", fmt.Errorf("dimensions %q: want one dimension and its value, e.g. {\"model\":\"gpt-4o\"}", dims)
	}
	for k, v := range m {
		name, value = k, v
	}
	return name, value, nil
}

// DimensionLabel is a line's dimension as people read it: model=gpt-4o,
// model="" for rows without the property, "" for an ordinary line.
func DimensionLabel(dims string) string {
	name, value, err := lineDimension(dims)
	switch {
	case err != nil:
		return dims
	case name == "":
		return ""
	case value == "":
		return name + `=""`
	}
	return name + "=" + value
}

// rowFilter keeps the rows of one dimension value: the rows a dimensional
// line covers. The zero filter keeps every row.
type rowFilter struct{ name, value string }

func (f rowFilter) keeps(props string) bool {
	return f.name == "" || ledger.DimensionValue(props, f.name) == f.value
}

// filterOf is the row filter of line dimensions dims.
func filterOf(dims string) (rowFilter, error) {
	name, value, err := lineDimension(dims)
	return rowFilter{name, value}, err
}

// splitBy is the pricer's splitter, nil when no plan version prices any
// meter by a dimension (then nothing needs rows' properties for it).
func (p *pricer) splitBy() splitter {
	if p == nil || !p.pr.Catalog.ByDimension() {
		return nil
	}
	return func(customer, meter string, start, end int64, tz string, late bool) (string, error) {
		var v *pricing.Plan
		var err error
		if late {
			v, err = p.lateVersion(customer, start, end, tz, 0) // a dimension's split is the period's first version's
		} else {
			v, err = p.versionFor(customer, start, tz)
		}
		if err != nil || v == nil {
			return "", err
		}
		if pr := v.Price(meter); pr != nil {
			return pr.By, nil
		}
		return "", nil
	}
}

// linePrice is the price that bills line l under version v: the meter's
// price, or for a price by dimension the rate card of the line's value; nil
// when v does not price the meter. A value with no card and no default is an
// error naming the meter and the value: billing it 0 would be a silent gift.
func linePrice(v *pricing.Plan, l *InvoiceLine) (*pricing.Price, error) {
	p := v.Price(l.Meter)
	if p == nil {
		return nil, nil
	}
	name, value, err := lineDimension(l.Dimensions)
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", l.LineNo, err)
	}
	switch {
	case p.By == "" && name == "":
		return p, nil
	case p.By == "":
		return nil, fmt.Errorf("line %d bills meter %q by %s, but plan %q from %s does not price it by a dimension", l.LineNo, l.Meter, name, v.Name, v.EffectiveFrom)
	case name != p.By:
		return nil, fmt.Errorf("line %d bills meter %q by %q, but plan %q from %s prices it by %s", l.LineNo, l.Meter, name, v.Name, v.EffectiveFrom, p.By)
	}
	card := p.Card(value)
	if card == nil {
		cards := slices.Sorted(maps.Keys(p.Rates))
		return nil, fmt.Errorf("meter %q has usage with %s %q in %s, and plan %q from %s has no rate card for it and no default (its cards: %s): add one under rates or a default",
			l.Meter, p.By, value, l.Period, v.Name, v.EffectiveFrom, strings.Join(cards, ", "))
	}
	return card, nil
}
