package invoice

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// InvoiceMoney is what an invoice charges, frozen at its close. All of it
// is empty on an invoice no plan priced (no assignment and no default plan,
// or closed before prices existed).
type InvoiceMoney struct {
	Plan        string // the plan in force on the period's first day
	Currency    string
	Snapshot    string // the plan versions that priced it: a JSON array, the invoice's own version first
	PriceDigest []byte // SHA-256 of Snapshot
	Fee         string // rounded, like every amount here
	TrueUp      string // minimum − (fee + the period's own line amounts), when positive
	Total       string // fee + line amounts + true-up
	// What prepaid grants gave the invoice (their sum) and what is left to
	// pay; both "" when no grant gave anything (credits.go).
	Credits   string
	AmountDue string
}

// LineMoney is one line's amount. A line whose meter the plan does not
// price has no amount and counts toward nothing.
type LineMoney struct {
	BilledBefore  string // the period's total billed before this line: 0 for the period's own lines
	PlanVersion   string // the version that priced it: plan@effective_from
	AmountPrecise string // price(before + quantity) − price(before), exact
	Amount        string // AmountPrecise rounded once to the currency's minor unit, half-even
	Charge        string // the price's breakdown (pricing.Margin), JSON
}

// Pricing is what a close prices invoices with: the plans hookledger.yml
// declares and which customer is on which.
type Pricing struct {
	Catalog *pricing.Catalog
	Plans   *customer.Plans
}

// LoadPricing reads what a close prices with: the plan assignments, with
// catalog and the default plan (nil when no plan is declared), and the
// customers known without usage (registered or assigned a plan). It refuses
// a catalog that changed a version a closed invoice was priced with
// (CheckFrozenPrices): every command that prices loads its pricing here.
func LoadPricing(ctx context.Context, db PricingSource, catalog *pricing.Catalog, defaultPlan string) (*Pricing, []string, error) {
	if catalog == nil || len(catalog.Names()) == 0 {
		return nil, nil, nil
	}
	if err := CheckFrozenPrices(ctx, db, catalog); err != nil {
		return nil, nil, err
	}
	as, err := customer.PlanAssignments(ctx, db, "")
	if err != nil {
		return nil, nil, err
	}
	cs, err := customer.Customers(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	known := map[string]bool{}
	for _, a := range as {
		known[a.Customer] = true
	}
	for _, c := range cs {
		known[c.ID] = true
	}
	return &Pricing{Catalog: catalog, Plans: customer.NewPlans(defaultPlan, as)}, slices.Sorted(maps.Keys(known)), nil
}

// jsonRaw is stored JSON, embedded as it is in JSON output.
type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }

// beforeIfLate shows a late line's billed_before in JSON; the period's own
// lines start from zero by definition.
func beforeIfLate(l InvoiceLine) string {
	if !l.Late {
		return ""
	}
	return l.Money.BilledBefore
}

// versionOn is the plan version that prices customer's usage of a period
// whose first day is day (nil, nil: no plan).
func (pr *Pricing) versionOn(customer string, day pricing.Date) (*pricing.Plan, error) {
	name, _ := pr.Plans.On(customer, day)
	if name == "" {
		return nil, nil
	}
	v, err := pr.Catalog.Version(name, day)
	if err != nil {
		return nil, fmt.Errorf("customer %q: %w", customer, err)
	}
	return v, nil
}

// pricer prices the invoices of one close. What is the same for many of
// them is worked out once per close: a period's first day in its zone
// (a zone other than UTC is otherwise read from the zone files again for
// every invoice) and the snapshot of a set of versions with its digest (the
// JSON of whole plans, the same for every invoice they price). A pricer
// lives as long as its close: Pricing itself is shared and stays read-only.
//
// Late usage of a closed period is priced by what priced that period, read
// from the invoices already closed (periodbill.go): ctx and src are the
// close's, held for its one transaction.
type pricer struct {
	pr     *Pricing
	ctx    context.Context
	src    billedSource
	days   map[zonedStart]pricing.Date
	snaps  map[string]priceSnapshot
	billed map[customerPeriod]*billedPeriod
	frozen map[string]map[string]*pricing.Plan // stored snapshot -> its versions, by versionKey
	origin map[*pricing.Plan]int64             // a version read from a snapshot -> the first invoice that stores it
	// unpriced are the close's invoices' usage nothing priced (Unpriced).
	unpriced []Unpriced
}

// Unpriced is usage on an invoice that no price bills: a meter the
// customer's plan version does not price (and does not say is free), or
// a customer without a plan while plans exist. The invoice bills its
// quantity with no amount; invoice close and preview warn about it.
type Unpriced struct {
	Customer string `json:"customer"`
	Meter    string `json:"meter"`
	Period   string `json:"period"`
	Plan     string `json:"plan,omitempty"` // plan@effective_from; "" when the customer has none
}

func (u Unpriced) String() string {
	if u.Plan == "" {
		return fmt.Sprintf("customer %q has %s usage in %s and no plan: it is billed as a quantity with no amount (assign a plan, or set customers.default_plan)", u.Customer, u.Meter, u.Period)
	}
	return fmt.Sprintf("customer %q: plan %s has no price for meter %q, so its usage in %s is billed as a quantity with no amount (price it, or add unpriced: free to the version)", u.Customer, u.Plan, u.Meter, u.Period)
}

type zonedStart struct {
	start int64
	tz    string
}

type priceSnapshot struct {
	json   string
	digest [32]byte
}

// newPricer returns nil for nil: invoices without prices. src reads what
// earlier closes billed (the close's own transaction).
func newPricer(ctx context.Context, pr *Pricing, src billedSource) *pricer {
	if pr == nil {
		return nil
	}
	return &pricer{pr: pr, ctx: ctx, src: src, days: map[zonedStart]pricing.Date{}, snaps: map[string]priceSnapshot{},
		billed: map[customerPeriod]*billedPeriod{}, frozen: map[string]map[string]*pricing.Plan{},
		origin: map[*pricing.Plan]int64{}}
}

func (p *pricer) day(start int64, tz string) pricing.Date {
	k := zonedStart{start, tz}
	d, ok := p.days[k]
	if !ok {
		d = ledger.PeriodDay(start, tz)
		p.days[k] = d
	}
	return d
}

// versionFor is the plan version that prices customer's usage of the period
// starting at start (nil, nil: no plan).
func (p *pricer) versionFor(customer string, start int64, tz string) (*pricing.Plan, error) {
	return p.pr.versionOn(customer, p.day(start, tz))
}

// price prices inv's lines and settles it with the plan version in force
// on its period's first day. A late line is priced with the version that
// priced the closed period it belongs to (lateVersion), at the margin, and
// carries the period's rounding: its amount is the period's charge after it,
// rounded once, less what the period's earlier lines billed (pricing.Carry).
// Lines must carry their BilledBefore. The result is frozen with the
// invoice. A nil pricer prices nothing.
func (p *pricer) price(inv *Invoice) error {
	if p == nil {
		return nil
	}
	own, err := p.versionFor(inv.Customer, inv.PeriodStart, inv.TZ)
	if err != nil {
		return err
	}
	parts, err := p.partsOf(inv.Customer, inv.PeriodStart, inv.PeriodEnd, inv.TZ)
	if err != nil {
		return err
	}
	// versionOf is the version that prices own line l: its part's.
	versionOf := func(l *InvoiceLine) *pricing.Plan {
		for _, pt := range parts {
			if pt.start == l.PartStart && l.PartEnd != 0 {
				return pt.version
			}
		}
		return own
	}
	for i := range inv.Lines {
		l := &inv.Lines[i]
		v := versionOf(l)
		if !l.Late && (v == nil || v.Price(l.Meter) == nil && !v.BillsUnpricedFree()) {
			u := Unpriced{Customer: inv.Customer, Meter: l.Meter, Period: inv.Period}
			if v != nil {
				u.Plan = v.Name + "@" + string(v.EffectiveFrom)
			}
			p.unpriced = append(p.unpriced, u)
		}
	}
	if own == nil {
		return nil
	}
	used := []*pricing.Plan{own}
	for _, pt := range parts {
		if pt.version.Currency != own.Currency {
			return fmt.Errorf("customer %q changes plan inside %s from %s (%s) to %s (%s): one invoice has one currency: assign a plan in another currency from the first day of a period",
				inv.Customer, inv.Period, versionKey(own), own.Currency, versionKey(pt.version), pt.version.Currency)
		}
		if used, err = p.use(used, pt.version, inv.Customer); err != nil {
			return err
		}
	}
	for i := range inv.Lines {
		l := &inv.Lines[i]
		v, carry := versionOf(l), (*pricing.Decimal)(nil)
		if l.Late {
			if v, err = p.lateVersion(inv.Customer, l.PeriodStart, l.PeriodEnd, l.TZ, l.PartStart); err != nil {
				return err
			}
			if v == nil {
				l.Money.PlanVersion, l.Money.AmountPrecise, l.Money.Amount, l.Money.Charge = "", "", "", ""
				continue // no plan priced that period: the late line bills a quantity only
			}
			if v.Currency != own.Currency {
				return fmt.Errorf("customer %q: late usage of %s is priced in %s (plan %q from %s), the invoice in %s: one invoice has one currency",
					inv.Customer, l.Period, v.Currency, v.Name, v.EffectiveFrom, own.Currency)
			}
			if used, err = p.use(used, v, inv.Customer); err != nil {
				return err
			}
			if carry, err = p.carry(inv.Customer, l); err != nil {
				return err
			}
		}
		if err := priceLine(l, v, carry); err != nil {
			return fmt.Errorf("customer %q: %w", inv.Customer, err)
		}
	}
	snap, err := p.snapshot(used)
	if err != nil {
		return err
	}
	digest := snap.digest // each invoice its own copy
	inv.Money = InvoiceMoney{Plan: own.Name, Currency: own.Currency, Snapshot: snap.json, PriceDigest: digest[:]}
	if parts != nil {
		return settleParts(inv, parts)
	}
	return settle(inv, own)
}

// settleParts totals inv, whose period is split into parts: each part's
// version settles it (its fee and minimum prorated by the part's share of
// the period's time, its own lines' amounts), frozen as inv.Parts; late
// lines add to the total and to no part.
func settleParts(inv *Invoice, parts []part) error {
	var fees, trueUps, usage, late []pricing.Decimal
	inv.Parts = make([]InvoicePart, len(parts))
	for i, pt := range parts {
		var own []pricing.Decimal
		for _, l := range inv.Lines {
			if l.Late || l.PartStart != pt.start || l.Money.Amount == "" {
				continue
			}
			a, err := pricing.ParseDecimal(l.Money.Amount)
			if err != nil {
				return fmt.Errorf("line %d: amount: %w", l.LineNo, err)
			}
			own = append(own, a)
		}
		s, err := pt.version.SettlePart(pt.end-pt.start, inv.PeriodEnd-inv.PeriodStart, own)
		if err != nil {
			return fmt.Errorf("customer %q: %w", inv.Customer, err)
		}
		inv.Parts[i] = InvoicePart{Start: pt.start, End: pt.end, Version: versionKey(pt.version), Fee: s.Fee.String(), TrueUp: s.TrueUp.String()}
		fees, trueUps, usage = append(fees, s.Fee), append(trueUps, s.TrueUp), append(usage, s.Usage)
	}
	for _, l := range inv.Lines {
		if !l.Late || l.Money.Amount == "" {
			continue
		}
		a, err := pricing.ParseDecimal(l.Money.Amount)
		if err != nil {
			return fmt.Errorf("line %d: amount: %w", l.LineNo, err)
		}
		late = append(late, a)
	}
	cur := parts[0].version.CurrencyOf()
	sum := func(xs []pricing.Decimal) (pricing.Decimal, error) {
		x, err := pricing.Sum(xs...)
		if err != nil {
			return pricing.Decimal{}, err
		}
		return cur.Amount(x)
	}
	fee, err := sum(fees)
	if err != nil {
		return err
	}
	trueUp, err := sum(trueUps)
	if err != nil {
		return err
	}
	total, err := sum(append(append(append(fees, trueUps...), usage...), late...))
	if err != nil {
		return err
	}
	inv.Money.Fee, inv.Money.TrueUp, inv.Money.Total = fee.String(), trueUp.String(), total.String()
	return nil
}

// use adds v to the versions an invoice of customer's is priced with.
func (p *pricer) use(used []*pricing.Plan, v *pricing.Plan, customer string) ([]*pricing.Plan, error) {
	i := slices.IndexFunc(used, func(u *pricing.Plan) bool { return versionKey(u) == versionKey(v) })
	switch {
	case i < 0:
		return append(used, v), nil
	case used[i] != v:
		// One label, two contents (storedVersion): a snapshot holds one.
		stored := v
		if p.origin[stored] == 0 {
			stored = used[i]
		}
		return nil, fmt.Errorf("customer %q: %w", customer, frozenError(stored, p.origin[stored]))
	}
	return used, nil
}

// carry is what late line l's period billed before it for its meter (and
// dimension value), rounded: what the line's amount carries.
func (p *pricer) carry(customer string, l *InvoiceLine) (*pricing.Decimal, error) {
	b, err := p.billedFor(customer, l.PeriodStart, l.PeriodEnd)
	if err != nil {
		return nil, err
	}
	billed := b.amounts[lineKeyOf(l.Meter, l.Dimensions, l.PartStart)]
	return &billed, nil
}

// priceLateOnly prices an invoice of late usage only, in another currency
// than the customer's invoice of the period (foreignLate): each line with
// the version that priced its period, at the margin and carrying the
// period's rounding, as on any invoice. Late lines count toward neither a
// fee nor a minimum, so it has neither: its fee and true-up are empty (what
// marks such an invoice, lateOnly) and its total is the sum of its lines.
// Its plan is the version of its first line.
func (p *pricer) priceLateOnly(inv *Invoice) error {
	var used []*pricing.Plan
	for i := range inv.Lines {
		l := &inv.Lines[i]
		v, err := p.lateVersion(inv.Customer, l.PeriodStart, l.PeriodEnd, l.TZ, l.PartStart)
		if err != nil {
			return err
		}
		if v == nil || len(used) > 0 && v.Currency != used[0].Currency {
			return fmt.Errorf("customer %q: late usage of %s does not belong on invoice %d, of late usage in one currency", inv.Customer, l.Period, inv.ID)
		}
		if used, err = p.use(used, v, inv.Customer); err != nil {
			return err
		}
		carry, err := p.carry(inv.Customer, l)
		if err != nil {
			return err
		}
		if err := priceLine(l, v, carry); err != nil {
			return fmt.Errorf("customer %q: %w", inv.Customer, err)
		}
	}
	snap, err := p.snapshot(used)
	if err != nil {
		return err
	}
	digest := snap.digest
	inv.Money = InvoiceMoney{Plan: used[0].Name, Currency: used[0].Currency, Snapshot: snap.json, PriceDigest: digest[:]}
	return settleLateOnly(inv, used[0].CurrencyOf())
}

// lateOnly reports whether inv is an invoice of late usage in another
// currency (priceLateOnly): priced, with no fee.
func lateOnly(inv *Invoice) bool { return inv.Money.Currency != "" && inv.Money.Fee == "" }

// settleLateOnly totals an invoice of late usage only: the sum of its
// lines' rounded amounts, with no fee and no true-up.
func settleLateOnly(inv *Invoice, cur pricing.Currency) error {
	total := pricing.NewDecimal(0, 0)
	for _, l := range inv.Lines {
		if l.Money.Amount == "" {
			continue
		}
		a, err := pricing.ParseDecimal(l.Money.Amount)
		if err == nil {
			total, err = pricing.Add(total, a)
		}
		if err != nil {
			return fmt.Errorf("line %d: amount: %w", l.LineNo, err)
		}
	}
	total, err := cur.Amount(total)
	if err != nil {
		return err
	}
	inv.Money.Fee, inv.Money.TrueUp, inv.Money.Total = "", "", total.String()
	return nil
}

// snapshot is snapshot(used), made once per close for each set of
// versions. A catalog holds one version of a name per date, so names and
// dates in snapshot order identify the set.
func (p *pricer) snapshot(used []*pricing.Plan) (priceSnapshot, error) {
	ordered := snapshotOrder(used)
	var key []byte
	for _, v := range ordered {
		key = append(append(append(append(key, v.Name...), 0), v.EffectiveFrom...), 0)
	}
	if s, ok := p.snaps[string(key)]; ok {
		return s, nil
	}
	b, err := snapshot(ordered)
	if err != nil {
		return priceSnapshot{}, err
	}
	s := priceSnapshot{json: string(b), digest: sha256.Sum256(b)}
	p.snaps[string(key)] = s
	return s, nil
}

// priceLine sets l's amount under version v (unchanged when v does not price
// l's meter); a line of a dimension value is priced by that value's card.
// carry is, for a late line, the rounded amount the period's earlier lines
// billed for it: its amount is then the period's charge after it rounded
// once, less carry (pricing.Carry). Without carry (a period's own line, whose
// carry is zero, and late lines closed before carrying) the margin is
// rounded on its own.
func priceLine(l *InvoiceLine, v *pricing.Plan, carry *pricing.Decimal) error {
	l.Money.PlanVersion, l.Money.AmountPrecise, l.Money.Amount, l.Money.Charge = "", "", "", ""
	p, err := linePrice(v, l)
	if p == nil || err != nil {
		return err
	}
	before, err := pricing.ParseDecimal(l.Money.BilledBefore)
	if err != nil {
		return fmt.Errorf("line %d: billed before: %w", l.LineNo, err)
	}
	after, err := pricing.Sum(before, l.Quantity.Decimal())
	if err != nil {
		return err
	}
	m, err := p.Margin(before, after)
	if err != nil {
		return err
	}
	var rounded pricing.Decimal
	if carry != nil {
		rounded, err = v.CurrencyOf().CarryAmount(&m, *carry)
	} else {
		rounded, err = v.CurrencyOf().Round(m.Amount)
	}
	if err != nil {
		return fmt.Errorf("line %d: %w", l.LineNo, err)
	}
	charge := m.AppendJSON(nil) // what json.Marshal(m) writes, without reflection
	l.Money.PlanVersion, l.Money.AmountPrecise, l.Money.Amount, l.Money.Charge = versionKey(v), m.Amount.String(), rounded.String(), string(charge)
	return nil
}

// settle totals inv's priced lines with the fee and minimum of its own
// version.
func settle(inv *Invoice, own *pricing.Plan) error {
	var usage, late []pricing.Decimal
	for _, l := range inv.Lines {
		if l.Money.Amount == "" {
			continue
		}
		a, err := pricing.ParseDecimal(l.Money.Amount)
		if err != nil {
			return fmt.Errorf("line %d: amount: %w", l.LineNo, err)
		}
		if l.Late {
			late = append(late, a)
		} else {
			usage = append(usage, a)
		}
	}
	s, err := own.Settle(usage, late)
	if err != nil {
		return fmt.Errorf("customer %q: %w", inv.Customer, err)
	}
	inv.Money.Fee, inv.Money.TrueUp, inv.Money.Total = s.Fee.String(), s.TrueUp.String(), s.Total.String()
	return nil
}

// snapshotOrder is the order versions appear in a snapshot: the invoice's
// own first (used[0]), then the others by date.
func snapshotOrder(used []*pricing.Plan) []*pricing.Plan {
	rest := slices.Clone(used[1:])
	slices.SortFunc(rest, func(a, b *pricing.Plan) int {
		if a.EffectiveFrom < b.EffectiveFrom {
			return -1
		}
		if a.EffectiveFrom > b.EffectiveFrom {
			return 1
		}
		return 0
	})
	return append([]*pricing.Plan{used[0]}, rest...)
}

// snapshot is the canonical JSON of versions in snapshot order.
func snapshot(ordered []*pricing.Plan) ([]byte, error) {
	b, err := json.Marshal(ordered)
	if err != nil {
		return nil, fmt.Errorf("price snapshot: %w", err)
	}
	return b, nil
}

// charges reports whether a customer with no usage still owes something
// under the version: a fee or a minimum.
func charges(v *pricing.Plan) bool {
	return v != nil && (v.Fee != nil && v.Fee.Sign() > 0 || v.Minimum != nil && v.Minimum.Sign() > 0)
}

// checkMoney recomputes a closed invoice's amounts from the versions it
// stores and the billed-before totals recomputed from the ledger (before,
// by line number). Every difference is a problem in verify's words.
func checkMoney(inv *Invoice, before map[int64]string) []string {
	var msgs []string
	if inv.Money.Currency == "" {
		for _, l := range inv.Lines {
			if l.Money.Amount != "" || l.Money.AmountPrecise != "" {
				msgs = append(msgs, fmt.Sprintf("line %d has an amount on an invoice no plan priced", l.LineNo))
			}
		}
		return msgs
	}
	if sum := sha256.Sum256([]byte(inv.Money.Snapshot)); !bytes.Equal(sum[:], inv.Money.PriceDigest) {
		return append(msgs, "the stored price snapshot does not match its digest: the prices were changed after the close")
	}
	versions, own, err := readSnapshot(inv.Money.Snapshot)
	if err != nil {
		return append(msgs, err.Error())
	}
	if own.Name != inv.Money.Plan || own.Currency != inv.Money.Currency {
		msgs = append(msgs, fmt.Sprintf("invoice says plan %q in %s, its price snapshot %q in %s", inv.Money.Plan, inv.Money.Currency, own.Name, own.Currency))
	}
	recomputed := *inv
	recomputed.Lines = slices.Clone(inv.Lines)
	for i := range recomputed.Lines {
		l := &recomputed.Lines[i]
		stored := inv.Lines[i].Money
		if b, ok := before[l.LineNo]; ok && b != stored.BilledBefore {
			msgs = append(msgs, fmt.Sprintf("line %d says %s was billed before it, the ledger says %s", l.LineNo, stored.BilledBefore, b))
			continue
		}
		if stored.PlanVersion == "" {
			// No amount: right for a meter the version does not price, and
			// for late usage of a period no plan was in force for.
			switch {
			case stored.Amount != "":
				msgs = append(msgs, fmt.Sprintf("line %d has an amount but no plan version", l.LineNo))
			case !l.Late && own.Price(l.Meter) != nil:
				msgs = append(msgs, fmt.Sprintf("line %d (%s) has no amount, but %s prices it", l.LineNo, l.Meter, own.Name))
			}
			continue
		}
		v := versions[stored.PlanVersion]
		if v == nil {
			msgs = append(msgs, fmt.Sprintf("line %d was priced with version %s, which the snapshot does not hold", l.LineNo, stored.PlanVersion))
			continue
		}
		carry, err := storedCarry(stored.Charge)
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("line %d: %v", l.LineNo, err))
			continue
		}
		if carry != nil && !l.Late {
			msgs = append(msgs, fmt.Sprintf("line %d bills its own period but carries %s billed before it: only a late line carries", l.LineNo, carry))
			continue
		}
		if err := priceLine(l, v, carry); err != nil {
			msgs = append(msgs, fmt.Sprintf("line %d: %v", l.LineNo, err))
			continue
		}
		l.Money.PlanVersion = stored.PlanVersion // a date-only name resolved above
		// An invoice closed before zeros lost their sign says -0.00 where
		// the recomputation says 0.00: the same amount.
		stored.Amount, stored.AmountPrecise, stored.Charge = pricing.UnsignedZeros(stored.Amount),
			pricing.UnsignedZeros(stored.AmountPrecise), pricing.UnsignedZeros(stored.Charge)
		if l.Money != stored {
			msgs = append(msgs, fmt.Sprintf("line %d (%s %s) recomputes to %s (%s exactly), invoice says %s (%s)",
				l.LineNo, meterLabel(*l), l.Period, l.Money.Amount, l.Money.AmountPrecise, stored.Amount, stored.AmountPrecise))
		}
	}
	if lateOnly(inv) {
		for _, l := range inv.Lines {
			if !l.Late {
				msgs = append(msgs, fmt.Sprintf("line %d bills its own period on an invoice of late usage only (no fee)", l.LineNo))
			}
		}
		err = settleLateOnly(&recomputed, own.CurrencyOf())
	} else if len(inv.Parts) > 0 {
		var parts []part
		for _, pt := range inv.Parts {
			v := versions[pt.Version]
			if v == nil {
				return append(msgs, fmt.Sprintf("its part from %s is priced with version %s, which the snapshot does not hold",
					ledger.MsTime(pt.Start, inv.TZ).Format(time.RFC3339), pt.Version))
			}
			parts = append(parts, part{start: pt.Start, end: pt.End, version: v})
		}
		if err = settleParts(&recomputed, parts); err == nil && recomputed.partsJSON() != inv.partsJSON() {
			msgs = append(msgs, fmt.Sprintf("its parts recompute to %s, invoice says %s", recomputed.partsJSON(), inv.partsJSON()))
		}
	} else {
		err = settle(&recomputed, own)
	}
	if err != nil {
		return append(msgs, err.Error())
	}
	if m := recomputed.Money; m.Fee != inv.Money.Fee || m.TrueUp != inv.Money.TrueUp || m.Total != inv.Money.Total {
		msgs = append(msgs, fmt.Sprintf("fee, true-up and total recompute to %s, %s, %s %s; invoice says %s, %s, %s",
			m.Fee, m.TrueUp, m.Total, m.Currency, inv.Money.Fee, inv.Money.TrueUp, inv.Money.Total))
	}
	return msgs
}
