package ledger

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hookledger/hookledger/pricing"
)

// Aggregation says how a meter's rows become one billed quantity.
type Aggregation string

// The aggregations a meter can declare.
const (
	AggSum          Aggregation = "sum"           // total of the quantities (the default)
	AggCount        Aggregation = "count"         // number of usage rows
	AggMax          Aggregation = "max"           // largest quantity, e.g. peak seats
	AggMin          Aggregation = "min"           // smallest quantity
	AggUniqueCount  Aggregation = "unique_count"  // distinct values of one property, e.g. active users
	AggLatest       Aggregation = "latest"        // quantity of the row with the latest event time, e.g. plan size
	AggTimeWeighted Aggregation = "time_weighted" // a gauge's value × hours held, e.g. GB-hours of storage (gauge.go)
	AggAvg          Aggregation = "avg"           // mean of the reported values
)

// Aggregations lists every aggregation in documentation order.
var Aggregations = []Aggregation{AggSum, AggCount, AggMax, AggMin, AggUniqueCount, AggLatest, AggTimeWeighted, AggAvg}

// Meter declares how one meter is aggregated and labelled. Adjustments add
// their signed quantity to the aggregate of the usage rows, whatever the
// aggregation: a -1 adjustment on a unique_count meter bills one user fewer.
type Meter struct {
	Name        string      `yaml:"name" json:"name"`
	Aggregation Aggregation `yaml:"aggregation" json:"aggregation"` // default sum
	// Property is the property whose distinct values unique_count counts.
	Property string `yaml:"property" json:"property,omitempty"`
	Unit     string `yaml:"unit" json:"unit,omitempty"`
	// Properties are the properties every usage row of this meter keeps
	// (mappings must extract them); Property and Dimensions are always among them.
	Properties []string `yaml:"properties" json:"properties,omitempty"`
	// Dimensions are properties usage can be grouped and filtered by
	// (usage --group-by model --where region=eu) and a price can vary by.
	// A row without one has the empty value: it is grouped, never dropped.
	Dimensions []string `yaml:"dimensions" json:"dimensions,omitempty"`
	// Stripe, when set, pushes the meter's usage to a Stripe meter
	// (docs/stripe.md).
	Stripe *StripeMeter `yaml:"stripe" json:"stripe,omitempty"`
}

// Stripe push modes.
const (
	StripeStream = "stream" // every ledger row, in the transaction that writes it
	StripeClose  = "close"  // every invoice line, in the close
)

// StripeMeter is how a meter reaches Stripe: the meter's event name there,
// when its usage is pushed, and the exact factor that turns a quantity into
// Stripe's whole numbers (1000: a quantity of 0.001 is one unit in Stripe).
type StripeMeter struct {
	EventName  string           `yaml:"event_name" json:"event_name"`
	Mode       string           `yaml:"mode" json:"mode"`                       // stream (default) or close
	Multiplier *pricing.Decimal `yaml:"multiplier" json:"multiplier,omitempty"` // default 1
	// MeterID is the meter's id in Stripe (mtr_…), when known: Stripe's
	// error reports name the meter by id, so a sample error that names no
	// meter event identifier is still linked to this meter's pushes.
	MeterID string `yaml:"meter_id" json:"meter_id,omitempty"`
}

// Factor is the multiplier, 1 when left out.
func (s *StripeMeter) Factor() pricing.Decimal {
	if s.Multiplier == nil {
		return pricing.NewDecimal(1, 0)
	}
	return *s.Multiplier
}

// normalize fills the defaults and validates s; errors name their key.
func (s *StripeMeter) normalize() error {
	switch {
	case s.EventName == "":
		return fmt.Errorf("stripe.event_name: required (the event name of the meter in Stripe)")
	case len(s.EventName) > 100:
		return fmt.Errorf("stripe.event_name: longer than Stripe's 100 characters")
	case s.MeterID != "" && (!strings.HasPrefix(s.MeterID, "mtr_") || len(s.MeterID) > 100):
		return fmt.Errorf("stripe.meter_id: %q is not a Stripe meter id (mtr_…)", s.MeterID)
	}
	switch s.Mode {
	case "":
		s.Mode = StripeStream
	case StripeStream, StripeClose:
	default:
		return fmt.Errorf("stripe.mode: %q is not stream or close", s.Mode)
	}
	if s.Multiplier == nil {
		return nil
	}
	if err := s.Multiplier.Check(); err != nil {
		return fmt.Errorf("stripe.multiplier: %v", err)
	}
	if s.Multiplier.Sign() <= 0 {
		return fmt.Errorf("stripe.multiplier: %s is not positive", s.Multiplier)
	}
	return nil
}

// Voidable says whether a usage row of m can be voided: taking a row back
// out of a sum or a count is one signed row; taking it out of a max, min,
// latest or distinct count would need the other rows.
func (m Meter) Voidable() bool {
	return m.Aggregation == AggSum || m.Aggregation == AggCount || m.Aggregation == ""
}

// Normalize fills defaults and validates m. The error starts with the key it
// concerns ("aggregation: ...").
func (m *Meter) Normalize() error {
	if m.Name == "" {
		return fmt.Errorf("name: required")
	}
	if err := CheckIdentifier(m.Name); err != nil {
		return fmt.Errorf("name: %w", err)
	}
	if m.Aggregation == "" {
		m.Aggregation = AggSum
	}
	if !slices.Contains(Aggregations, m.Aggregation) {
		names := make([]string, len(Aggregations))
		for i, a := range Aggregations {
			names[i] = string(a)
		}
		return fmt.Errorf("aggregation: %q is not one of %s", m.Aggregation, strings.Join(names, ", "))
	}
	switch {
	case m.Aggregation == AggUniqueCount && m.Property == "":
		return fmt.Errorf("property: unique_count needs the property whose distinct values it counts")
	case m.Aggregation != AggUniqueCount && m.Property != "":
		return fmt.Errorf("property: only unique_count takes a property (list kept properties under properties)")
	}
	for i, p := range m.Properties {
		if p == "" || strings.TrimSpace(p) != p {
			return fmt.Errorf("properties[%d]: %q is not a property name", i, p)
		}
		if slices.Contains(m.Properties[:i], p) {
			return fmt.Errorf("properties[%d]: %q is listed twice", i, p)
		}
	}
	for i, d := range m.Dimensions {
		if err := checkDimensionName(d); err != nil {
			return fmt.Errorf("dimensions[%d]: %w", i, err)
		}
		if slices.Contains(m.Dimensions[:i], d) {
			return fmt.Errorf("dimensions[%d]: %q is listed twice", i, d)
		}
	}
	if m.Property != "" && !slices.Contains(m.Properties, m.Property) {
		m.Properties = append(m.Properties, m.Property)
	}
	for _, d := range m.Dimensions {
		if !slices.Contains(m.Properties, d) {
			m.Properties = append(m.Properties, d)
		}
	}
	if m.Stripe != nil {
		if m.Aggregation != AggSum {
			// A meter event adds to Stripe's meter; only a sum is the
			// sum of its rows' pushes.
			return fmt.Errorf("stripe: only a sum meter is pushed to Stripe (this one is %s)", m.Aggregation)
		}
		return m.Stripe.normalize()
	}
	return nil
}

// checkDimensionName keeps dimension names apart from the other words of
// --group-by and --where: a dimension called "day" or "customer" could not be
// told from the built-in grouping, and the where syntax needs names without
// its operators, commas, spaces or parentheses.
func checkDimensionName(d string) error {
	switch d {
	case GroupCustomer, GroupMeter, string(ByHour), string(ByDay), string(ByMonth):
		return fmt.Errorf("%q is a built-in grouping; name the dimension differently", d)
	}
	if d == "" {
		return fmt.Errorf("a dimension needs a name")
	}
	for _, r := range d {
		if !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return fmt.Errorf("%q: a dimension name holds letters, digits, '_', '-' and '.' only", d)
		}
	}
	return nil
}

// Meters looks up meter declarations by name. An undeclared meter is summed.
type Meters map[string]Meter

// NewMeters indexes declared meters; they must already be normalized.
func NewMeters(ms []Meter) Meters {
	out := make(Meters, len(ms))
	for _, m := range ms {
		out[m.Name] = m
	}
	return out
}

// Get returns the declaration of name, or a sum meter without a unit.
func (ms Meters) Get(name string) Meter {
	if m, ok := ms[name]; ok {
		return m
	}
	return Meter{Name: name, Aggregation: AggSum}
}

// Spec is what must agree for rows of different meters to share one group.
type Spec struct {
	Agg      Aggregation
	property string
	unit     string
}

func (m Meter) Spec() Spec { return Spec{m.Aggregation, m.Property, m.Unit} }
