package invoice

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// What verify checks of money across invoices (checkMoney checks each
// invoice alone): that one label names one version in every snapshot, and
// that each period's money adds up as a close bills it.

// checkPeriodMoney checks invs (every closed invoice, with lines):
//   - a plan version (plan@date) is the same in every invoice's snapshot: two
//     contents under one label mean it was edited after it priced an invoice;
//   - a late line that carries its period's rounding (pricing.Carry) carries
//     exactly the rounded amounts the period's earlier lines billed for it,
//     and is priced by the version that priced the period's own invoice;
//   - so the amounts billed for a period's line add up to its final total
//     priced and rounded once (the last line's carried total), whenever the
//     last line carries: lines closed before carrying rounded each margin on
//     their own and are not held to it.
func checkPeriodMoney(invs []Invoice) []ledger.Problem {
	var out []ledger.Problem
	problem := func(inv int64, format string, args ...any) {
		out = append(out, ledger.Problem{Table: "invoices", ID: inv, Msg: "money: " + fmt.Sprintf(format, args...)})
	}
	type seen struct {
		json    string
		invoice int64
	}
	labels := map[string]seen{}
	owns := map[customerPeriod]map[int64]string{} // the versionKey of each period's own invoice, by part (0: not split)
	parsed := map[string]map[string]*pricing.Plan{}
	for _, inv := range invs {
		if inv.Money.Snapshot == "" {
			continue
		}
		vs, ok := parsed[inv.Money.Snapshot]
		if !ok {
			var own *pricing.Plan
			var err error
			if vs, own, err = readSnapshot(inv.Money.Snapshot); err != nil {
				continue // checkMoney reports it
			}
			vs[""] = own
			parsed[inv.Money.Snapshot] = vs
			for k, v := range vs {
				if k != versionKey(v) {
					continue
				}
				b, err := json.Marshal(v)
				if err != nil {
					continue
				}
				prior, ok := labels[k]
				switch {
				case !ok:
					labels[k] = seen{string(b), inv.ID}
				case prior.json != string(b):
					problem(inv.ID, "its price snapshot holds plan version %s with other prices than invoice %d's: the version was changed after it priced a closed invoice (a change is a new version)", k, prior.invoice)
				}
			}
		}
		if !lateOnly(&inv) { // an invoice of late usage in another currency priced an earlier period
			byPart := map[int64]string{0: versionKey(vs[""])}
			for _, pt := range inv.Parts {
				byPart[pt.Start] = pt.Version
			}
			owns[customerPeriod{inv.Customer, inv.PeriodStart, inv.PeriodEnd}] = byPart
		}
	}

	type periodLine struct {
		customerPeriod
		key  string
		part int64
	}
	type billedLine struct {
		inv  int64
		line InvoiceLine
	}
	byLine := map[periodLine][]billedLine{}
	for _, inv := range invs {
		for _, l := range inv.Lines {
			k := periodLine{customerPeriod{inv.Customer, l.PeriodStart, l.PeriodEnd}, lineKeyOf(l.Meter, l.Dimensions, l.PartStart), l.PartStart}
			byLine[k] = append(byLine[k], billedLine{inv.ID, l})
		}
	}
	keys := make([]periodLine, 0, len(byLine))
	for k := range byLine {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b periodLine) int {
		return cmp.Or(cmp.Compare(byLine[a][0].inv, byLine[b][0].inv), cmp.Compare(byLine[a][0].line.LineNo, byLine[b][0].line.LineNo))
	})
	for _, k := range keys {
		var billed pricing.Decimal
		var last *pricing.Carry
		for _, b := range byLine[k] { // invoices in id order, as closed
			l := b.line
			last = nil
			if l.Money.Amount == "" {
				continue
			}
			var m pricing.Margin
			if l.Money.Charge != "" && json.Unmarshal([]byte(l.Money.Charge), &m) == nil && m.Carry != nil {
				if m.Carry.Billed.Cmp(billed) != 0 {
					problem(b.inv, "line %d (%s %s) carries %s billed before it, but the period's earlier lines billed %s",
						l.LineNo, meterLabel(l), l.Period, m.Carry.Billed, billed)
				}
				if own, ok := owns[k.customerPeriod][k.part]; ok && own != l.Money.PlanVersion {
					problem(b.inv, "late line %d (%s %s) is priced with %s, but the period's own invoice was priced with %s: late usage of a closed period is priced by the version that priced it",
						l.LineNo, meterLabel(l), l.Period, l.Money.PlanVersion, own)
				}
				last = m.Carry
			}
			a, err := pricing.ParseDecimal(l.Money.Amount)
			if err != nil {
				continue // checkMoney reports it
			}
			if billed, err = pricing.Add(billed, a); err != nil {
				continue
			}
		}
		if last != nil && last.Total.Cmp(billed) != 0 {
			end := byLine[k][len(byLine[k])-1]
			problem(end.inv, "the lines billing %s %s add up to %s, but its total priced once and rounded is %s",
				meterLabel(end.line), end.line.Period, billed, last.Total)
		}
	}
	return out
}
