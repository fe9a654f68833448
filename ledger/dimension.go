package ledger

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// A dimension is a property a meter declares for grouping, filtering and
// pricing (Meter.Dimensions). Its value is read from the row's canonical
// properties JSON: a string is its text, any other JSON value its JSON text
// (42, true), and a missing or null property the empty value "". Rows without
// the property are grouped under "", never dropped, so a grouped report always
// adds up to the ungrouped one.
//
// Values are read in Go from the properties column rather than from a
// generated column or a side table: dimension names are configuration, so a
// migration cannot declare a column per dimension, and a side table would add
// a write per dimension to every row on the hot path. Every usage read is
// already narrowed by the (customer_id, meter, occurred_at) and event-time
// indexes; BENCHMARKS.md ("Dimensions") measures what reading the properties
// costs on top.

// dimensionValues writes the values of names, in order, found in the
// properties object props into out (len(out) == len(names)), in one pass.
func dimensionValues(props string, names []string, out []string) {
	for i := range out {
		out[i] = ""
	}
	if len(names) == 0 || props == "" || props == "{}" {
		return
	}
	gjson.Parse(props).ForEach(func(k, v gjson.Result) bool {
		for i, n := range names { // a name may be both grouped and filtered
			if n == k.Str {
				out[i] = dimensionText(v)
			}
		}
		return true
	})
}

func dimensionText(v gjson.Result) string {
	switch v.Type {
	case gjson.Null:
		return ""
	case gjson.String:
		return v.Str
	}
	return v.Raw
}

// DimensionValue is the value of dimension name in a row's properties.
func DimensionValue(props, name string) string {
	out := []string{""}
	dimensionValues(props, []string{name}, out)
	return out[0]
}

// Where operators.
const (
	OpEq  = "="
	OpNe  = "!="
	OpIn  = "in"
	OpNin = "not in"
)

// Condition is one term of --where: a dimension compared with one value
// (= and !=) or a list (in, not in).
type Condition struct {
	Name   string   `json:"name"`
	Op     string   `json:"op"`
	Values []string `json:"values"`
}

// match reports whether a row whose dimension has value v passes.
func (c Condition) match(v string) bool {
	in := slices.Contains(c.Values, v)
	if c.Op == OpNe || c.Op == OpNin {
		return !in
	}
	return in
}

func (c Condition) String() string {
	switch c.Op {
	case OpIn, OpNin:
		return c.Name + " " + c.Op + " (" + strings.Join(c.Values, ",") + ")"
	}
	return c.Name + c.Op + c.Values[0]
}

// ParseWhere reads --where: terms separated by commas, each name=value,
// name!=value, name in (a,b) or name not in (a,b). Every term must hold
// (they are ANDed). A value is taken literally (no quotes); name= matches
// rows without the dimension. An empty list, name in (), is refused.
func ParseWhere(s string) ([]Condition, error) {
	var terms []string
	depth, startAt := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
			if depth < 0 {
				return nil, fmt.Errorf("%q: a ')' without its '('", s)
			}
		case ',':
			if depth == 0 {
				terms = append(terms, s[startAt:i])
				startAt = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%q: a '(' without its ')'", s)
	}
	terms = append(terms, s[startAt:])
	var out []Condition
	for _, t := range terms {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		c, err := parseCondition(t)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func parseCondition(t string) (Condition, error) {
	if i := strings.Index(t, "("); i >= 0 {
		head, list := strings.TrimSpace(t[:i]), t[i+1:]
		if !strings.HasSuffix(list, ")") {
			return Condition{}, fmt.Errorf("%q: the list must end the term: name in (a,b)", t)
		}
		list = strings.TrimSuffix(list, ")")
		if strings.TrimSpace(list) == "" {
			// Split would read "()" as a list of one empty value and select
			// rows without the dimension, which is what name= says.
			return Condition{}, fmt.Errorf("%q: the list is empty: give at least one value, name in (a,b); name= selects rows without the dimension", t)
		}
		fields := strings.Fields(head)
		var c Condition
		switch {
		case len(fields) == 2 && strings.EqualFold(fields[1], "in"):
			c = Condition{Name: fields[0], Op: OpIn}
		case len(fields) == 3 && strings.EqualFold(fields[1], "not") && strings.EqualFold(fields[2], "in"):
			c = Condition{Name: fields[0], Op: OpNin}
		default:
			return Condition{}, fmt.Errorf("%q: want name in (a,b) or name not in (a,b)", t)
		}
		for _, v := range strings.Split(list, ",") {
			c.Values = append(c.Values, strings.TrimSpace(v))
		}
		return c, nil
	}
	for _, op := range []string{OpNe, OpEq} {
		if name, val, ok := strings.Cut(t, op); ok {
			name = strings.TrimSpace(name)
			if name == "" || strings.ContainsAny(name, " !=") {
				return Condition{}, fmt.Errorf("%q: want name=value, name!=value or name in (a,b)", t)
			}
			return Condition{Name: name, Op: op, Values: []string{strings.TrimSpace(val)}}, nil
		}
	}
	return Condition{}, fmt.Errorf("%q: want name=value, name!=value or name in (a,b)", t)
}

// declaredDimensions lists every meter's dimensions, sorted, for errors and
// to check a name.
func (ms Meters) declaredDimensions() []string {
	var out []string
	for _, m := range ms {
		for _, d := range m.Dimensions {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// dimensionsKey joins a group's dimension values into one comparable key
// (JSON, so no value can run into the next).
func dimensionsKey(vals []string) string {
	if len(vals) == 0 {
		return ""
	}
	b, _ := json.Marshal(vals)
	return string(b)
}
