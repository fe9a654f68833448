package ledger_test

import (
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/ledger"
)

func dimMeters() ledger.Meters {
	ms := []ledger.Meter{
		{Name: "tokens", Unit: "tokens", Dimensions: []string{"model", "region"}},
		{Name: "peak", Aggregation: ledger.AggMax, Dimensions: []string{"model"}},
	}
	for i := range ms {
		if err := ms[i].Normalize(); err != nil {
			panic(err)
		}
	}
	return ledger.NewMeters(ms)
}

// TestDimensionsAgreeWithBruteForce writes random rows (properties present,
// missing, null or numbers; adjustments without properties) and checks that
// every random grouping and filter answers what a recomputation over the rows
// written gives, group by group: nothing dropped, nothing doubled.
func TestDimensionsAgreeWithBruteForce(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	rng := mrand.New(mrand.NewPCG(26, 1))
	from := ts("2026-11-01T00:00:00Z")
	models := []string{`"gpt-4o"`, `"claude"`, `"o1"`, `null`, `7`, ``}
	regions := []string{`"eu"`, `"us"`, ``}
	var rows []row
	for i := 0; i < 400; i++ {
		r := row{Customer: fmt.Sprintf("c%d", rng.IntN(3)), Meter: []string{"tokens", "peak"}[rng.IntN(2)],
			Qty: q(fmt.Sprint(rng.IntN(1000))), At: from.Add(time.Duration(rng.IntN(30*24)) * time.Hour)}
		if rng.IntN(10) == 0 {
			r.Adjust = true
			r.Qty = q(fmt.Sprint(rng.IntN(200) - 100))
		} else {
			var kv []string
			if m := models[rng.IntN(len(models))]; m != "" {
				kv = append(kv, `"model":`+m)
			}
			if g := regions[rng.IntN(len(regions))]; g != "" {
				kv = append(kv, `"region":`+g)
			}
			r.Props = "{" + strings.Join(kv, ",") + "}"
		}
		rows = append(rows, r)
	}
	e.Write(rows...)
	meters := dimMeters()

	value := func(r row, name string) string {
		if r.Props == "" {
			return ""
		}
		return ledger.DimensionValue(r.Props, name)
	}
	groupings := [][]string{{"customer", "meter", "model"}, {"meter", "region"}, {"meter", "model", "region"}, {"customer", "meter"}, {"meter"}}
	wheres := []string{"", "model=gpt-4o", "model!=gpt-4o", "model in (gpt-4o,7)", "region=eu,model=claude", "model=", "region not in (eu)", "model in (claude, o1),region!="}
	for _, g := range groupings {
		for _, w := range wheres {
			t.Run(strings.Join(g, "+")+"/"+w, func(t *testing.T) {
				qr, err := ledger.UsageParams{From: "2026-11", To: "2026-12", GroupBy: strings.Join(g, ","), Where: w}.Query(meters)
				if err != nil {
					t.Fatal(err)
				}
				rep := e.Query(qr)

				type acc struct {
					sum, max      ledger.Total
					adj           ledger.Total
					events, adjNo int64
				}
				want := map[string]*acc{}
				for _, r := range rows {
					keep := true
					for _, c := range qr.Where {
						v := value(r, c.Name)
						in := slices.Contains(c.Values, v)
						if (c.Op == ledger.OpNe || c.Op == ledger.OpNin) == in {
							keep = false
						}
					}
					if !keep {
						continue
					}
					var key []string
					for _, name := range g {
						switch name {
						case "customer":
							key = append(key, r.Customer)
						case "meter":
							key = append(key, r.Meter)
						default:
							key = append(key, value(r, name))
						}
					}
					k := strings.Join(key, "|")
					a := want[k]
					if a == nil {
						a = &acc{}
						want[k] = a
					}
					if r.Adjust {
						a.adj = a.adj.Plus(r.Qty)
						a.adjNo++
						continue
					}
					if a.events == 0 || r.Qty.Cmp(a.max) > 0 {
						a.max = r.Qty
					}
					a.sum = a.sum.Plus(r.Qty)
					a.events++
				}
				got := map[string]bool{}
				for _, l := range rep.Lines {
					var key []string
					for _, name := range g {
						switch name {
						case "customer":
							key = append(key, l.Customer)
						case "meter":
							key = append(key, l.Meter)
						default:
							v, ok := l.Dimensions[name]
							if !ok {
								t.Fatalf("line %+v lacks dimension %s", l, name)
							}
							key = append(key, v)
						}
					}
					k := strings.Join(key, "|")
					a := want[k]
					if a == nil {
						t.Fatalf("line %s: %+v, not in the recomputation", k, l)
					}
					if got[k] {
						t.Fatalf("group %s answered twice", k)
					}
					got[k] = true
					w := a.sum
					if l.Meter == "peak" {
						w = ledger.Total{}
						if a.events > 0 {
							w = a.max
						}
					}
					w = w.Plus(a.adj)
					if !l.Quantity.Equal(w) || l.Events != a.events || l.Adjustments != a.adjNo {
						t.Errorf("group %s: quantity %s events %d adjustments %d, recomputed %s, %d, %d", k, l.Quantity, l.Events, l.Adjustments, w, a.events, a.adjNo)
					}
				}
				if len(got) != len(want) {
					t.Errorf("%d groups answered, %d recomputed", len(got), len(want))
				}
				if len(want) == 0 {
					t.Errorf("no rows selected: the case tests nothing")
				}
			})
		}
	}
}

func TestWhereAndGroupByRefuseWhatTheyCannotMean(t *testing.T) {
	meters := dimMeters()
	for _, c := range []struct {
		p    ledger.UsageParams
		want string
	}{
		{ledger.UsageParams{GroupBy: "customer,colour"}, `group-by: "colour" is not one of customer, meter, hour, day, month or a meter's dimension (dimensions: model, region)`},
		{ledger.UsageParams{Where: "colour=red"}, `where: "colour" is not a dimension of any meter`},
		{ledger.UsageParams{Where: "model in (a,b"}, `where: "model in (a,b": a '(' without its ')'`},
		{ledger.UsageParams{Where: "model"}, `want name=value`},
		{ledger.UsageParams{Where: "model is (a)"}, `want name in (a,b)`},
		// An empty list selected the rows without the dimension (issue 40, item 9).
		{ledger.UsageParams{Where: "model in ()"}, `where: "model in ()": the list is empty: give at least one value, name in (a,b); name= selects rows without the dimension`},
		{ledger.UsageParams{Where: "region=eu, model not in ( )"}, `where: "model not in ( )": the list is empty`},
	} {
		_, err := c.p.Query(meters)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.p, err, c.want)
		}
	}
	ws, err := ledger.ParseWhere("model in ( a , b ),region!=eu,tier=x=y")
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 3 || !slices.Equal(ws[0].Values, []string{"a", "b"}) || ws[1].Op != ledger.OpNe || ws[2].Values[0] != "x=y" {
		t.Fatalf("parsed %+v", ws)
	}
}

// FuzzParseWhere: any text either parses into named conditions with values
// or is refused with an error, never a panic.
func FuzzParseWhere(f *testing.F) {
	for _, s := range []string{"model=gpt-4o,region!=eu", "model in (a,b)", "m not in (a)", "((", "a=)", ",,", "x in ()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cs, err := ledger.ParseWhere(s)
		if err != nil {
			return
		}
		for _, c := range cs {
			if c.Name == "" || len(c.Values) == 0 {
				t.Fatalf("%q: condition %+v", s, c)
			}
		}
	})
}
