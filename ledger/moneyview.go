package ledger

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
// it (pricing.Margin.Describe), with the price taken from the invoice's own
// snapshot. Unpriced lines have none.
func Breakdowns(inv *Invoice) map[int64]string {
	out := map[int64]string{}
	versions := snapshotVersions(inv.Money.Snapshot)
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
		if v := versions[pricing.Date(l.Money.PlanVersion)]; v != nil {
			p = v.Price(l.Meter)
		}
		out[l.LineNo] = m.Describe(p)
	}
	return out
}

// snapshotVersions reads the plan versions an invoice stores, by date; a
// snapshot that cannot be read gives none (verify reports it).
func snapshotVersions(snapshot string) map[pricing.Date]*pricing.Plan {
	versions := map[pricing.Date]*pricing.Plan{}
	var raws []json.RawMessage
	if snapshot == "" || json.Unmarshal([]byte(snapshot), &raws) != nil {
		return versions
	}
	for _, raw := range raws {
		if v, err := pricing.ParseSnapshot(raw); err == nil {
			versions[v.EffectiveFrom] = v
		}
	}
	return versions
}
