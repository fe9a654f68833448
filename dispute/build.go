package dispute

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

type eventKey struct{ provider, id string }

type invoiceAcc struct {
	view  InvoiceView
	lines map[int64]*LineView
	inv   *invoice.Invoice
	// before holds, by line, the billed-before totals recomputed from the
	// ledger of the lines that still match it: the money check's input.
	before     map[int64]string
	breakdowns map[int64]string
}

// builder gathers invoices, lines, rows and events, each once.
type builder struct {
	ctx      context.Context
	q        *schema.ReadTx
	v        *Verifier
	keys     apiKeys
	tr       *Trace
	invoices map[int64]*invoiceAcc
	rows     map[int64]*RowView
	rowsRead map[int64]ledger.Row // the rows as read, for the chain checks
	lines    map[string][]invoice.InvoiceLine
	events   map[eventKey]*EventView
	eventSeq []eventKey // events named by the target come first
	loaded   int        // eventSeq[:loaded] have their receipts and attempts
}

func (b *builder) target(tg Target) error {
	switch tg.Kind {
	case KindInvoice, KindLine:
		inv, err := invoice.GetInvoice(b.ctx, b.q, tg.Invoice)
		if errors.Is(err, invoice.ErrNoInvoice) {
			return fmt.Errorf("%s: %w: there is no invoice %d (see `hookledger invoice list`)", tg, ErrNotFound, tg.Invoice)
		}
		if err != nil {
			return err
		}
		b.addInvoice(inv)
		found := false
		for _, l := range inv.Lines {
			if tg.Kind == KindInvoice || l.LineNo == tg.Line {
				found = true
				if err := b.addLine(inv, l, true); err != nil {
					return err
				}
			}
		}
		if tg.Kind == KindLine && !found {
			return fmt.Errorf("%s: %w: invoice %d has no line %d (it has %d)", tg, ErrNotFound, tg.Invoice, tg.Line, len(inv.Lines))
		}
		return nil
	case KindRow:
		r, err := invoice.GetRow(b.ctx, b.q, tg.Row)
		if errors.Is(err, invoice.ErrNoRow) {
			return fmt.Errorf("%s: %w: the ledger has no row %d", tg, ErrNotFound, tg.Row)
		}
		if err != nil {
			return err
		}
		return b.addRow(*r)
	case KindEvent:
		rows, err := invoice.EventRows(b.ctx, b.q, tg.Provider, tg.EventID)
		if err != nil {
			return err
		}
		ev := b.wantEvent(tg.Provider, tg.EventID)
		if err := b.loadEvents(); err != nil {
			return err
		}
		if ev.Receipt == nil && len(rows) == 0 {
			return fmt.Errorf("%s: %w: no receipt and no ledger row for event %q of provider %q", tg, ErrNotFound, tg.EventID, tg.Provider)
		}
		for _, r := range rows {
			if err := b.addRow(r); err != nil {
				return err
			}
		}
		return b.linkedEvents(tg.Provider, rows)
	}
	return fmt.Errorf("%w: kind %q", ErrBadTarget, tg.Kind)
}

// linkedEvents adds to an event's trace the event an amendment links it to:
// for a voided event, the event that amends it (if it was amended); for an
// amendment, the event it amends (its rows' ref). So either trace shows both,
// the voids with their reasons between them.
func (b *builder) linkedEvents(provider string, rows []ledger.Row) error {
	var linked []string
	for _, r := range rows {
		voided, isVoid := strings.CutPrefix(r.EventID, ledger.VoidEventID(provider, ""))
		switch {
		case r.Kind == ledger.KindVoid && isVoid:
			linked = append(linked, ledger.AmendedEventID(voided))
		case r.Kind == ledger.KindUsage && strings.HasPrefix(r.Ref, "event:"+provider+"/"):
			linked = append(linked, strings.TrimPrefix(r.Ref, "event:"+provider+"/"))
		}
	}
	for _, id := range slices.Compact(linked) {
		rows, err := invoice.EventRows(b.ctx, b.q, provider, id)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			continue // voided, never amended
		}
		b.wantEvent(provider, id)
		for _, r := range rows {
			if err := b.addRow(r); err != nil {
				return err
			}
		}
	}
	return b.loadEvents()
}

func (b *builder) customer(customer string, p ledger.Period, meters ledger.Meters) error {
	start, end := p.Start.UnixMilli(), p.End.UnixMilli()
	b.tr.Scope = &Scope{Customer: customer, Period: p.Label, TZ: p.Zone, PeriodStart: p.Start, PeriodEnd: p.End}
	invs, err := invoice.ListInvoices(b.ctx, b.q, invoice.InvoiceFilter{Customer: customer, PeriodStart: start, PeriodEnd: end})
	if err != nil {
		return err
	}
	for i := range invs {
		for _, l := range invs[i].Lines {
			if err := b.addLine(&invs[i], l, true); err != nil {
				return err
			}
		}
	}
	late, err := invoice.LinesForPeriod(b.ctx, b.q, customer, start, end)
	if err != nil {
		return err
	}
	for _, l := range late {
		inv, err := b.invoice(l.InvoiceID)
		if err != nil {
			return err
		}
		if err := b.addLine(inv, l, true); err != nil {
			return err
		}
	}
	rows, err := invoice.PeriodRows(b.ctx, b.q, customer, start, end)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := b.addRow(r); err != nil {
			return err
		}
	}
	rep, err := ledger.Query(b.ctx, b.q, ledger.UsageQuery{From: p.Start, To: p.End, Customer: customer, Meters: meters,
		GroupBy: []string{ledger.GroupMeter}})
	if err != nil {
		return err
	}
	b.tr.Usage = rep.Lines
	if len(b.invoices) == 0 && len(b.rows) == 0 {
		return fmt.Errorf("customer %q: %w: no invoice and no ledger rows for %s", customer, ErrNotFound, p)
	}
	return nil
}

// invoice reads an invoice once per trace (for its digest, over all lines).
func (b *builder) invoice(id int64) (*invoice.Invoice, error) {
	return invoice.GetInvoice(b.ctx, b.q, id)
}

// addInvoice adds an invoice once, with its digest recomputed over all its lines.
func (b *builder) addInvoice(inv *invoice.Invoice) *invoiceAcc {
	acc := b.invoices[inv.ID]
	if acc == nil {
		recomputed := invoice.InvoiceDigest(inv)
		acc = &invoiceAcc{lines: map[int64]*LineView{}, view: InvoiceView{
			ID: inv.ID, Customer: inv.Customer, Period: inv.Period, TZ: inv.TZ,
			PeriodStart: zoned(inv.PeriodStart, inv.TZ), PeriodEnd: zoned(inv.PeriodEnd, inv.TZ),
			Cutoff: utc(inv.Cutoff), LedgerHead: inv.LedgerHead, ClosedAt: utc(inv.ClosedAt), LineCount: len(inv.Lines),
			Digest: hex.EncodeToString(inv.Digest), DigestRecomputed: hex.EncodeToString(recomputed),
			DigestOK: bytes.Equal(recomputed, inv.Digest), Money: moneyOf(inv), Lines: []LineView{}},
			inv: inv, before: map[int64]string{}, breakdowns: invoice.Breakdowns(inv)}
		acc.view.Credits = b.creditsOf(inv)
		b.invoices[inv.ID] = acc
	}
	return acc
}

// addLine adds an invoice line (and its invoice) with its recomputation;
// withRows also adds every row it covers.
func (b *builder) addLine(inv *invoice.Invoice, l invoice.InvoiceLine, withRows bool) error {
	acc := b.addInvoice(inv)
	lv := acc.lines[l.LineNo]
	if lv != nil && (!withRows || lv.RowIDs != nil) {
		return nil
	}
	check, err := invoice.CheckLine(b.ctx, b.q, l)
	if err != nil {
		return err
	}
	lv = &LineView{Ref: lineRef(l.InvoiceID, l.LineNo), Invoice: l.InvoiceID, Line: l.LineNo, Customer: l.Customer, Meter: l.Meter,
		Dimension: invoice.DimensionLabel(l.Dimensions), Aggregation: l.Aggregation, Property: l.Property, Unit: l.Unit, Late: l.Late, Period: l.Period, TZ: l.TZ,
		PeriodStart: zoned(l.PeriodStart, l.TZ), PeriodEnd: zoned(l.PeriodEnd, l.TZ), AfterID: l.AfterID, ThroughID: l.ThroughID,
		Quantity: l.Quantity, Rows: l.Rows, Adjustments: l.Adjustments, MaxID: l.MaxID, Digest: hex.EncodeToString(l.Digest),
		Recomputed: Recomputed{Quantity: check.Quantity, Rows: check.UsageRows, Adjustments: check.Adjustments, MaxID: check.MaxID,
			Digest: hex.EncodeToString(check.Digest)},
		OK: check.Problem == "", Problem: check.Problem}
	if l.Money.Amount != "" {
		lv.LineMoney = LineMoney{Amount: l.Money.Amount, AmountPrecise: l.Money.AmountPrecise, Currency: inv.Money.Currency,
			PlanVersion: l.Money.PlanVersion, Charge: rawJSON(l.Money.Charge), Breakdown: acc.breakdowns[l.LineNo]}
		if l.Late {
			lv.BilledBefore, lv.Recomputed.BilledBefore = l.Money.BilledBefore, check.BilledBefore
		}
	}
	if check.Problem == "" {
		acc.before[l.LineNo] = check.BilledBefore
	}
	acc.lines[l.LineNo] = lv
	if !withRows {
		return nil
	}
	lv.RowIDs = make([]int64, 0, len(check.Rows))
	for _, r := range check.Rows {
		lv.RowIDs = append(lv.RowIDs, r.ID)
		if err := b.addRow(r); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) addRow(r ledger.Row) error {
	if b.rows[r.ID] != nil {
		return nil
	}
	props := r.Properties
	if props == "{}" {
		props = ""
	}
	b.rowsRead[r.ID] = r
	b.rows[r.ID] = &RowView{ID: r.ID, Kind: r.Kind, Provider: r.Provider, EventID: r.EventID, Customer: r.Customer, Meter: r.Meter,
		Quantity: r.Quantity, Properties: props, Reason: r.Reason, Ref: r.Ref, OccurredAt: utc(r.OccurredAt), RecordedAt: utc(r.RecordedAt),
		PrevHash: hex.EncodeToString(r.PrevHash), RowHash: hex.EncodeToString(r.RowHash), Chain: "ok", BilledBy: []string{}}
	return nil
}

// finish checks the rows' chain links, bills each row to its lines, adds the
// events behind the usage rows, orders everything and sums it up.
func (b *builder) finish() error {
	ids := make([]int64, 0, len(b.rows))
	for id := range b.rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rows := make([]ledger.Row, len(ids))
	for i, id := range ids {
		rows[i] = b.rowsRead[id]
	}
	problems, err := invoice.CheckLinksBatch(b.ctx, b.q, rows)
	if err != nil {
		return err
	}
	for _, r := range rows {
		rv := b.rows[r.ID]
		if p, ok := problems[r.ID]; ok {
			rv.Chain = p
		}
		lines, ok := b.lines[r.Customer]
		if !ok {
			if lines, err = invoice.CustomerLines(b.ctx, b.q, r.Customer); err != nil {
				return err
			}
			b.lines[r.Customer] = lines
		}
		for _, l := range lines {
			if !l.Covers(r) {
				continue
			}
			rv.BilledBy = append(rv.BilledBy, lineRef(l.InvoiceID, l.LineNo))
			if b.invoices[l.InvoiceID] == nil || b.invoices[l.InvoiceID].lines[l.LineNo] == nil {
				inv, err := b.invoice(l.InvoiceID)
				if err != nil {
					return err
				}
				if err := b.addLine(inv, l, false); err != nil {
					return err
				}
			}
		}
		if rv.Kind == ledger.KindUsage {
			ev := b.wantEvent(rv.Provider, rv.EventID)
			ev.RowIDs = append(ev.RowIDs, rv.ID)
		}
		b.tr.Rows = append(b.tr.Rows, *rv)
	}
	if b.tr.Rows == nil {
		b.tr.Rows = []RowView{}
	}
	if err := b.loadEvents(); err != nil {
		return err
	}

	invIDs := make([]int64, 0, len(b.invoices))
	for id := range b.invoices {
		invIDs = append(invIDs, id)
	}
	slices.Sort(invIDs)
	b.tr.Invoices = []InvoiceView{}
	for _, id := range invIDs {
		acc := b.invoices[id]
		acc.view.MoneyProblems = invoice.CheckInvoiceMoney(acc.inv, acc.before)
		if acc.inv.Money.Currency != "" {
			ok := len(acc.view.MoneyProblems) == 0
			acc.view.MoneyOK = &ok
		}
		for _, lv := range acc.lines {
			acc.view.Lines = append(acc.view.Lines, *lv)
		}
		slices.SortFunc(acc.view.Lines, func(x, y LineView) int { return cmp.Compare(x.Line, y.Line) })
		b.tr.Invoices = append(b.tr.Invoices, acc.view)
	}
	b.tr.Events = make([]EventView, 0, len(b.eventSeq))
	for _, k := range b.eventSeq {
		b.tr.Events = append(b.tr.Events, *b.events[k])
	}
	b.summarize()
	return nil
}

func (b *builder) summarize() {
	s := &b.tr.Summary
	s.ChainOK, s.InvoicesOK, s.Problems = true, true, []string{}
	for _, inv := range b.tr.Invoices {
		if !inv.DigestOK {
			s.InvoicesOK = false
			s.Problems = append(s.Problems, fmt.Sprintf("invoice %d: stored digest does not match its fields and lines: the invoice was changed after it was closed", inv.ID))
		}
		for _, l := range inv.Lines {
			if !l.OK {
				s.InvoicesOK = false
				s.Problems = append(s.Problems, fmt.Sprintf("%s: %s", l.Ref, l.Problem))
			}
		}
		if inv.MoneyOK != nil {
			ok := *inv.MoneyOK && (s.MoneyOK == nil || *s.MoneyOK)
			s.MoneyOK = &ok
		}
		for _, msg := range inv.MoneyProblems {
			s.InvoicesOK = false
			s.Problems = append(s.Problems, fmt.Sprintf("invoice %d: money: %s", inv.ID, msg))
		}
	}
	for _, r := range b.tr.Rows {
		switch r.Kind {
		case ledger.KindUsage:
			s.UsageRows++
		case ledger.KindAdjustment:
			s.Adjustments++
		case ledger.KindVoid:
			s.Voids++
		}
		if len(r.BilledBy) == 0 {
			s.UnbilledRows++
		}
		if len(r.BilledBy) > 1 {
			s.Problems = append(s.Problems, fmt.Sprintf("row %d is billed by %d invoice lines (%v)", r.ID, len(r.BilledBy), r.BilledBy))
		}
		if r.Chain != "ok" {
			s.ChainOK = false
			s.Problems = append(s.Problems, fmt.Sprintf("row %d: %s", r.ID, r.Chain))
		}
	}
	for _, e := range b.tr.Events {
		s.Events++
		s.Bodies.add(e.Verification.Status)
		if e.Verification.Status == Invalid {
			s.Problems = append(s.Problems, fmt.Sprintf("event %s:%s: %s", e.Provider, e.EventID, e.Verification.Detail))
		}
		for _, a := range e.Attempts {
			s.Attempts++
			s.Signatures.add(a.Signature.Status)
			switch a.Outcome {
			case string(custody.OutcomeDuplicate):
				s.Duplicates++
			case string(custody.OutcomePayloadMismatch):
				s.PayloadMismatches++
			}
			if a.Signature.Status == Invalid && e.Verification.Status != Invalid {
				s.Problems = append(s.Problems, fmt.Sprintf("event %s:%s %s: %s", e.Provider, e.EventID, a.Name(), a.Signature.Detail))
			}
		}
	}
}

// creditsOf is what each prepaid grant gave inv, with the grant as it was
// made (nil when none gave anything). A grant the credit ledger no longer
// holds is shown by its id alone: verify's credits check says why.
func (b *builder) creditsOf(inv *invoice.Invoice) []CreditView {
	if len(inv.Credits) == 0 {
		return nil
	}
	grants, err := invoice.Grants(b.ctx, b.q, inv.Customer, inv.ClosedAt)
	byID := map[string]*invoice.Grant{}
	if err == nil {
		for _, g := range grants {
			byID[g.ID] = g
		}
	}
	out := make([]CreditView, len(inv.Credits))
	for i, c := range inv.Credits {
		out[i] = CreditView{Grant: c.Grant, Amount: c.Amount, BalanceAfter: c.Balance, Granted: byID[c.Grant]}
	}
	return out
}

// moneyOf is what inv charges, for the trace; empty when no plan priced it.
func moneyOf(inv *invoice.Invoice) Money {
	m := inv.Money
	if m.Currency == "" {
		return Money{}
	}
	return Money{Plan: m.Plan, Currency: m.Currency, Fee: m.Fee, TrueUp: m.TrueUp, Total: m.Total, CreditsApplied: m.Credits, AmountDue: m.AmountDue,
		PriceDigest: hex.EncodeToString(m.PriceDigest), Prices: rawJSON(m.Snapshot)}
}

// rawJSON embeds stored JSON in the trace as it is; text that is not JSON
// (a damaged row: the money check says so) is left out rather than break
// the whole trace.
func rawJSON(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		return nil
	}
	return json.RawMessage(s)
}
