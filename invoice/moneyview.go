package invoice

import (
	"encoding/json"
	"fmt"

	"github.com/hookledger/hookledger/pricing"
)

// What the CLI, the console and the dispute trace read of an invoice's
// money beyond its stored fields. The rules stay in money.go.

// CheckInvoiceMoney recomputes inv's amounts from the price snapshot it
// stores, as `hookledger verify` does (checkMoney): before holds, by line
// number, the period's total billed before each line as recomputed from the
// ledger (CheckLine's BilledBefore); a line without an entry is priced from
// its stored total. Each difference is one message in verify's words; none
// means the money recomputes.
func CheckInvoiceMoney(inv *Invoice, before map[int64]string) []string {
	return checkMoney(inv, before)
}

// Breakdowns describes each priced line's charge for people (by line
// number): every tier's quantity × unit price, the packages billed, or for
// a late line the difference between the period's charge after and before
// it (pricing.Margin.Describe) and how its rounding was carried, with the
// price taken from the invoice's own snapshot. Unpriced lines have none.
func Breakdowns(inv *Invoice) map[int64]string {
	out := map[int64]string{}
	versions, _, _ := readSnapshot(inv.Money.Snapshot)
	for _, l := range inv.Lines {
		if l.Money.Charge == "" {
			continue
		}
		var m pricing.Margin
		if err := json.Unmarshal([]byte(l.Money.Charge), &m); err != nil {
			out[l.LineNo] = fmt.Sprintf("the stored breakdown cannot be read: %v", err)
			continue
		}
		var p *pricing.Price
		if v := versions[l.Money.PlanVersion]; v != nil {
			p, _ = linePrice(v, &l)
		}
		out[l.LineNo] = m.Describe(p)
		if c := m.Carry; c != nil { // a late line carries its period's rounding (pricing.Carry)
			out[l.LineNo] += fmt.Sprintf("; carried: the period's total priced once %s − %s billed before = %s", c.Total, c.Billed, l.Money.Amount)
		}
	}
	return out
}

// versionKey names a plan version in an invoice's snapshot and on its
// lines: the plan and its date, since two plans may take effect on the
// same day.
func versionKey(p *pricing.Plan) string { return p.Name + "@" + string(p.EffectiveFrom) }

// readSnapshot reads the plan versions an invoice stores, by versionKey,
// and the invoice's own version (the first).
func readSnapshot(snapshot string) (map[string]*pricing.Plan, *pricing.Plan, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(snapshot), &raws); err != nil || len(raws) == 0 {
		return nil, nil, fmt.Errorf("the stored price snapshot cannot be read: %v", err)
	}
	versions := map[string]*pricing.Plan{}
	byDate := map[pricing.Date][]*pricing.Plan{}
	var own *pricing.Plan
	for i, raw := range raws {
		v, err := pricing.ParseSnapshot(raw)
		if err != nil {
			return nil, nil, err
		}
		versions[versionKey(v)] = v
		byDate[v.EffectiveFrom] = append(byDate[v.EffectiveFrom], v)
		if i == 0 {
			own = v
		}
	}
	// Lines closed before versions were named plan@date name the date
	// alone; it still says which version when only one has that date.
	for d, vs := range byDate {
		if len(vs) == 1 {
			versions[string(d)] = vs[0]
		}
	}
	return versions, own, nil
}
