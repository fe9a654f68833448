package invoice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/hookledger/hookledger/chainhash"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// CloseRequest asks to close one period for one customer or for all.
type CloseRequest struct {
	Period   ledger.Period
	Customer string // one customer; "" with All
	All      bool
	// Grace is how long after the period's end closing is still refused, so
	// deliveries in flight at midnight land in the period's invoice.
	Grace  time.Duration
	Meters ledger.Meters
	// Now is the clock (tests replace it). Default time.Now.
	Now func() time.Time
	// DryRun computes the invoices and rolls back: a preview that changes nothing.
	DryRun bool
	// Preview is a dry run that also works before the period has ended: the
	// invoice as it would be if the period closed now (invoice preview),
	// read from a snapshot without the write lock (Preview, preview.go).
	Preview bool
	// Pricing prices the invoices; nil, they carry quantities only.
	Pricing *Pricing
	// Registered are customers known without usage (the registry and plan
	// assignments): one whose plan charges a fee or a minimum is invoiced
	// even when the period holds no usage of theirs.
	Registered []string
	// OnClose, when set, is called with the new invoices in the close's
	// transaction before it commits (Stripe's close-mode pushes): what must
	// leave hookledger for them commits with them or not at all.
	OnClose func(ctx context.Context, tx *schema.CloseTx, invoices []Invoice) error

	noIndex bool
	// leaveGaps skips the refusal of a gap no close can fill, as closes did
	// before it: tests build with it what older versions left behind.
	leaveGaps bool
	// preRuleLate bills late usage of every closed period, as closes did
	// before lateFits: tests build with it what older versions left behind.
	preRuleLate bool
}

// CloseResult is what a close produced or, when the period was already
// closed for the scope, what the earlier close produced.
type CloseResult struct {
	Existing bool      `json:"existing"` // nothing new: the period was already closed for this scope
	Cutoff   int64     `json:"cutoff_ms"`
	Head     int64     `json:"ledger_head"`
	Invoices []Invoice `json:"invoices"`
	// Unpriced is the new invoices' usage no price bills (the pricing
	// knows nothing of an earlier close's): each a warning, not an error.
	Unpriced []Unpriced `json:"unpriced,omitempty"`
	// Excluded are the customers a close for all customers could not
	// invoice, and why (for an existing close, those still not invoiced
	// since): the period stays open for each until a close of theirs
	// alone makes their invoice. invoice close exits 3 when there are any.
	Excluded []Excluded `json:"excluded,omitempty"`
}

// Excluded is a customer a close for all customers could not invoice.
type Excluded struct {
	Customer string `json:"customer"`
	Error    string `json:"error"`
}

func (x Excluded) String() string {
	return fmt.Sprintf("customer %q was not invoiced: %s; the period stays open for them: fix that, then close it for them alone (invoice close --customer %s)", x.Customer, x.Error, x.Customer)
}

// OpenExclusion is a customer a close for all customers could not
// invoice, still not invoiced for that period by a close of their own.
type OpenExclusion struct {
	Excluded
	Period ledger.Period
}

// ExclusionSource reads the closes and what they could not invoice (*schema.DB).
type ExclusionSource interface {
	PeriodCloses(ctx context.Context, scope string) ([]schema.PeriodClose, error)
	CloseExclusions(ctx context.Context) ([]schema.CloseExclusion, error)
}

// OpenExclusions lists every customer a close for all customers could not
// invoice and no close of theirs has since, oldest period first: what
// serve's scheduled close tries again, and what its metric counts.
func OpenExclusions(ctx context.Context, db ExclusionSource) ([]OpenExclusion, error) {
	xs, err := db.CloseExclusions(ctx)
	if err != nil || len(xs) == 0 {
		return nil, err
	}
	closes, err := db.PeriodCloses(ctx, "")
	if err != nil {
		return nil, err
	}
	byID := map[int64]schema.PeriodClose{}
	for _, c := range closes {
		byID[c.ID] = c
	}
	var out []OpenExclusion
	for _, x := range xs {
		all, ok := byID[x.CloseID]
		if !ok {
			continue
		}
		closedSince := slices.ContainsFunc(closes, func(c schema.PeriodClose) bool {
			return c.Customer == x.Customer && c.PeriodStart == all.PeriodStart && c.PeriodEnd == all.PeriodEnd
		})
		if closedSince {
			continue
		}
		out = append(out, OpenExclusion{Excluded: Excluded{Customer: x.Customer, Error: x.Error},
			Period: ledger.Period{Label: all.Period, Zone: all.TZ, Start: ledger.MsTime(all.PeriodStart, all.TZ), End: ledger.MsTime(all.PeriodEnd, all.TZ)}})
	}
	return out, nil
}

// openExclusions are the customers close all (a close for all customers)
// could not invoice and that no close of their own has invoiced since.
func openExclusions(ctx context.Context, tx closeStore, all schema.PeriodClose, closes []schema.PeriodClose) ([]Excluded, error) {
	xs, err := tx.CloseExclusions(ctx)
	if err != nil {
		return nil, fmt.Errorf("close: read the customers earlier closes did not invoice: %w", err)
	}
	var out []Excluded
	for _, x := range xs {
		if x.CloseID != all.ID {
			continue
		}
		closedSince := slices.ContainsFunc(closes, func(c schema.PeriodClose) bool {
			return c.Customer == x.Customer && c.PeriodStart == all.PeriodStart && c.PeriodEnd == all.PeriodEnd
		})
		if !closedSince {
			out = append(out, Excluded{Customer: x.Customer, Error: x.Error})
		}
	}
	return out, nil
}

// Close freezes the period's invoices in one write transaction (holding the
// write lock from its start), so the ingestion cutoff and the highest ledger id it covers
// describe the same moment: no row can commit in between. Closing a period
// already closed for the scope returns the earlier invoices unchanged.
func Close(ctx context.Context, db CloseStore, req CloseRequest) (*CloseResult, error) {
	if req.All == (req.Customer != "") {
		return nil, errors.New("close: name one customer or all customers")
	}
	if req.Preview {
		// One preview path: a read of a snapshot, never the write lock.
		if v, ok := db.(PreviewStore); ok {
			return Preview(ctx, v, req)
		}
		req.DryRun = true
	}
	if req.Now == nil {
		req.Now = time.Now
	}
	var res *CloseResult
	err := db.CloseTx(ctx, func(tx *schema.CloseTx) error {
		var err error
		if res, err = closeTx(ctx, tx, req); err != nil {
			return err
		}
		if req.DryRun || res.Existing {
			return schema.ErrRollback
		}
		if req.OnClose != nil {
			return req.OnClose(ctx, tx, res.Invoices)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res.Invoices == nil {
		res.Invoices = []Invoice{}
	}
	return res, nil
}

// closeTx is one close in its transaction: the answer of an earlier close
// of the scope if there is one (priorClose), else the moment of closing
// (closeMoment), then the period's lines and its late usage, priced and
// credited per customer (invoicesOf), stored, and sealed.
func closeTx(ctx context.Context, tx closeStore, req CloseRequest) (*CloseResult, error) {
	p := req.Period
	start, end := p.Start.UnixMilli(), p.End.UnixMilli()
	now := req.Now()
	if opens := p.End.Add(req.Grace); now.Before(opens) && !req.Preview {
		return nil, fmt.Errorf("close %s: %w: it can close from %s (period end + %s grace)",
			p.Label, ErrTooEarly, opens.Format(time.RFC3339), req.Grace)
	}
	if res, err := priorClose(ctx, tx, req); res != nil || err != nil {
		return res, err
	}
	closed, lastCredit, err := closeMoment(ctx, tx, req, now)
	if err != nil {
		return nil, err
	}
	closeID, cutoff, head, scope := closed.ID, closed.Cutoff, ledger.Chain{LastID: closed.LedgerHead}, req.Customer

	// Customers for whom this period was already closed (by a close of
	// theirs) keep that close; a close for all skips them, and their usage
	// since is late.
	skip := map[string]bool{}
	if req.All {
		done, err := tx.ClosedCustomers(ctx, start, end)
		if err != nil {
			return nil, fmt.Errorf("close: read closed periods: %w", err)
		}
		for _, c := range done {
			skip[c] = true
		}
	}

	credits, err := readCloseCredits(ctx, tx, scope, lastCredit, cutoff)
	if err != nil {
		return nil, err
	}
	prices := newPricer(ctx, req.Pricing, tx)
	split := prices.splitBy()
	partsOf := func(c string) ([]part, error) { return prices.partsOf(c, start, end, p.Zone) }
	lines, err := periodLines(ctx, tx, req, head.LastID, skip, split, partsOf)
	if err != nil {
		return nil, err
	}
	// Late usage goes only on an invoice it fits (lateFits): a backfill of
	// an earlier period leaves a later period's late usage pending.
	billable := start
	if req.preRuleLate {
		billable = math.MaxInt64
	}
	late, err := lateLines(ctx, tx, scope, head.LastID, billable, req.Meters, skip, split, req.noIndex)
	if err != nil {
		return nil, err
	}
	lines = append(lines, late...)

	byCustomer := map[string][]InvoiceLine{}
	for _, l := range lines {
		byCustomer[l.Customer] = append(byCustomer[l.Customer], l)
	}
	if err := addFeeOnly(byCustomer, req, prices, skip); err != nil {
		return nil, err
	}
	customers := make([]string, 0, len(byCustomer))
	for c := range byCustomer {
		customers = append(customers, c)
	}
	slices.Sort(customers)

	nextID, err := tx.NextInvoiceID(ctx)
	if err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	res := &CloseResult{Cutoff: cutoff, Head: head.LastID, Invoices: make([]Invoice, 0, len(customers))}
	cl := &closing{close: closed, prices: prices, credits: credits}
	for _, c := range customers {
		invs, err := cl.invoicesOf(c, byCustomer[c], nextID)
		if err != nil {
			// One customer the close cannot invoice does not stop a close
			// for all: it is recorded, with why, and the period stays open
			// for them (openExclusions). A plan version changed after it
			// priced a closed invoice is the configuration's fault, not the
			// customer's: it stops the close whole, as LoadPricing does.
			if !req.All || ctx.Err() != nil || errors.Is(err, ErrFrozenVersion) {
				return nil, fmt.Errorf("close %s: %w", p.Label, err)
			}
			x := Excluded{Customer: c, Error: err.Error()}
			if err := tx.InsertCloseExclusion(ctx, schema.CloseExclusion{CloseID: closeID, Customer: c, Error: x.Error}); err != nil {
				return nil, fmt.Errorf("close: %w", err)
			}
			res.Excluded = append(res.Excluded, x)
			continue
		}
		nextID += int64(len(invs))
		for i := range invs {
			inv := &invs[i]
			if err := tx.InsertInvoice(ctx, inv.record()); err != nil {
				return nil, fmt.Errorf("close: insert invoice for %s: %w", c, err)
			}
			for i := range inv.Lines {
				if err := tx.InsertInvoiceLine(ctx, inv.Lines[i].record()); err != nil {
					return nil, fmt.Errorf("close: insert invoice line for %s: %w", c, err)
				}
			}
			if err := credits.burn(ctx, tx, inv); err != nil {
				return nil, err
			}
			res.Invoices = append(res.Invoices, *inv)
		}
	}
	if prices != nil {
		res.Unpriced = prices.unpriced
	}
	if err := sealClose(ctx, tx, closed, res.Invoices); err != nil {
		return nil, fmt.Errorf("close %s: %w", p.Label, err)
	}
	return res, nil
}

// closing is what the invoices of one close share as each is priced and
// credited: the close, its pricer and the credits it draws on.
type closing struct {
	close   schema.PeriodClose
	prices  *pricer
	credits *closeCredits
}

// invoicesOf prepares customer c's invoices from its lines ls, numbered
// from nextID: its own, unless all it had was late usage of another
// currency and its plan charges nothing of its own, and one per other
// currency its late usage is priced in. It stores nothing.
func (cl *closing) invoicesOf(c string, ls []InvoiceLine, nextID int64) ([]Invoice, error) {
	start, zone := cl.close.PeriodStart, cl.close.TZ
	var foreign map[string][]InvoiceLine
	if cl.prices != nil {
		var err error
		if ls, foreign, err = cl.prices.foreignLate(c, start, zone, ls); err != nil {
			return nil, err
		}
	}
	var invs []Invoice
	if len(ls) > 0 || len(foreign) == 0 || cl.prices.charges(c, start, zone) {
		inv, err := cl.prepare(c, ls, false, nextID)
		if err != nil {
			return nil, err
		}
		invs = append(invs, inv)
	}
	for _, cur := range slices.Sorted(maps.Keys(foreign)) {
		inv, err := cl.prepare(c, foreign[cur], true, nextID+int64(len(invs)))
		if err != nil {
			return nil, err
		}
		invs = append(invs, inv)
	}
	return invs, nil
}

// prepare numbers, prices and credits one invoice of customer c (id id);
// lateOnly is an invoice of late usage in another currency than the
// customer's invoice (foreignLate).
func (cl *closing) prepare(c string, ls []InvoiceLine, lateOnly bool, id int64) (Invoice, error) {
	slices.SortFunc(ls, func(a, b InvoiceLine) int {
		return cmp.Or(cmpBool(a.Late, b.Late), cmp.Compare(a.PeriodStart, b.PeriodStart), cmp.Compare(a.Meter, b.Meter),
			cmp.Compare(a.Dimensions, b.Dimensions), cmp.Compare(a.PartStart, b.PartStart))
	})
	k := cl.close
	inv := Invoice{ID: id, CloseID: k.ID, Customer: c, Period: k.Period, TZ: k.TZ, PeriodStart: k.PeriodStart, PeriodEnd: k.PeriodEnd,
		Cutoff: k.Cutoff, LedgerHead: k.LedgerHead, ClosedAt: k.ClosedAt, Lines: ls}
	for i := range inv.Lines {
		inv.Lines[i].InvoiceID, inv.Lines[i].LineNo = inv.ID, int64(i+1)
	}
	price := cl.prices.price
	if lateOnly {
		price = cl.prices.priceLateOnly
	}
	if err := price(&inv); err != nil {
		return Invoice{}, err
	}
	if err := cl.credits.apply(&inv); err != nil {
		return Invoice{}, err
	}
	inv.Digest = invoiceDigest(&inv)
	return inv, nil
}

// priorClose is the answer of a close made before for req's scope (or,
// for one customer, by a close of all customers): what it froze. nil when
// the period is open for the scope; an error when another close overlaps
// it, or when closing it would leave a gap no close can fill.
func priorClose(ctx context.Context, tx closeStore, req CloseRequest) (*CloseResult, error) {
	// Already closed for this scope? Then the answer is what that close froze.
	p := req.Period
	start, end := p.Start.UnixMilli(), p.End.UnixMilli()
	closes, err := tx.OverlappingCloses(ctx, start, end)
	if err != nil {
		return nil, fmt.Errorf("close: read closed periods: %w", err)
	}
	var allClose, own *schema.PeriodClose
	for i, c := range closes {
		applies := req.All || c.Customer == "" || c.Customer == req.Customer
		if !applies {
			continue
		}
		if c.PeriodStart != start || c.PeriodEnd != end {
			return nil, fmt.Errorf("close %s: %w: %s was closed in %s (%s to %s); close periods with the same time zone",
				p.Label, ErrPeriodOverlap, c.Period, c.TZ, ledger.MsTime(c.PeriodStart, c.TZ).Format(time.RFC3339), ledger.MsTime(c.PeriodEnd, c.TZ).Format(time.RFC3339))
		}
		if c.Customer == "" {
			allClose = &closes[i]
		}
		if c.Customer == req.Customer {
			own = &closes[i]
		}
	}
	// A close for all customers that could not invoice this customer left
	// the period open for them: closing them alone now makes their invoice.
	var open []Excluded
	if allClose != nil && (req.All || own == nil) {
		if open, err = openExclusions(ctx, tx, *allClose, closes); err != nil {
			return nil, err
		}
		if !req.All && slices.ContainsFunc(open, func(x Excluded) bool { return x.Customer == req.Customer }) {
			allClose = nil
		}
	}
	if own == nil && allClose == nil && !req.leaveGaps {
		if err := refuseGaps(ctx, tx, req); err != nil {
			return nil, err
		}
	}
	if own != nil || allClose != nil {
		// Closed before for this scope (or, for one customer, by a close of
		// all customers): return what was frozen then.
		prior := own
		if prior == nil {
			prior = allClose
		}
		invs, err := listInvoices(ctx, tx, InvoiceFilter{Customer: req.Customer, PeriodStart: start, PeriodEnd: end}, true)
		if err != nil {
			return nil, err
		}
		if own == nil && len(invs) > 0 { // invoiced by the close for all
			prior = &schema.PeriodClose{Cutoff: invs[0].Cutoff, LedgerHead: invs[0].LedgerHead}
		}
		res := &CloseResult{Existing: true, Cutoff: prior.Cutoff, Head: prior.LedgerHead, Invoices: invs}
		if req.All {
			res.Excluded = open
		}
		return res, nil
	}
	return nil, nil
}

// closeMoment records the moment of closing req's period at now: the
// ledger head and the cutoff, with the credit chain's last entry the close
// counts up to.
func closeMoment(ctx context.Context, tx closeStore, req CloseRequest, now time.Time) (closed schema.PeriodClose, lastCredit schema.CreditEntry, err error) {
	p := req.Period
	start, end := p.Start.UnixMilli(), p.End.UnixMilli()
	// The moment of closing. The close holds the write lock: no row can
	// commit until we do, so "id <= head" is exact; the cutoff is kept above
	// the head's recorded_at so "recorded_at < cutoff" selects the same rows.
	head, err := ledger.LoadChain(ctx, tx)
	if err != nil {
		return closed, lastCredit, err
	}
	cutoff := now.UnixMilli()
	if head.LastID > 0 {
		headRecorded, err := tx.LedgerRowRecordedAt(ctx, head.LastID)
		if err != nil {
			return closed, lastCredit, fmt.Errorf("close: read ledger head: %w", err)
		}
		cutoff = max(cutoff, headRecorded+1)
	}
	// Grants count in the close as its rows do: recorded before the cutoff,
	// which is kept above the credit chain's end (and a grant written after
	// the close is recorded no earlier than its cutoff, custody.GrantCredit).
	lastCredit, err = tx.LastCredit(ctx)
	if errors.Is(err, schema.ErrNoCredits) && req.Preview {
		lastCredit, err = schema.CreditEntry{RowHash: chainhash.Genesis}, nil // a read-only preview of a database from before credits
	}
	if err != nil {
		return closed, lastCredit, fmt.Errorf("close: %w", err)
	}
	cutoff = max(cutoff, lastCredit.RecordedAt+1)
	closed = schema.PeriodClose{Customer: req.Customer, Period: p.Label, TZ: p.Zone, PeriodStart: start, PeriodEnd: end,
		GraceMS: req.Grace.Milliseconds(), Cutoff: cutoff, LedgerHead: head.LastID, ClosedAt: now.UnixMilli()}
	if closed.ID, err = tx.InsertPeriodClose(ctx, closed); err != nil {
		return closed, lastCredit, fmt.Errorf("close: record close: %w", err)
	}
	return closed, lastCredit, nil
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// lineAcc accumulates one future invoice line while rows stream by.
type lineAcc struct {
	agg  *ledger.Aggregate
	rows []covered
}

func (la *lineAcc) add(kind string, id int64, q ledger.Total, occurred int64, props string, hash []byte) {
	la.agg.Add(kind, id, q, occurred, props)
	la.rows = append(la.rows, covered{id, hash})
}

func (la *lineAcc) maxID() int64 {
	var m int64
	for _, r := range la.rows {
		m = max(m, r.id)
	}
	return m
}

// ledgerScan streams rows matching f to fn, with what aggregation and digests need.
func ledgerScan(ctx context.Context, src ledger.UsageSource, f schema.LedgerFilter, props bool,
	fn func(id int64, kind, customer, meter string, qty ledger.Total, occurred int64, props string, hash []byte)) error {
	err := src.ScanUsage(ctx, schema.UsageScan{Filter: f, Properties: props, Hashes: true}, func(r *schema.UsageRow) error {
		fn(r.ID, r.Kind, r.Customer, r.Meter, ledger.RowQuantity(r.Quantity, int(r.Decimals)), r.OccurredAt, r.Properties, r.RowHash)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read ledger: %w", err)
	}
	return nil
}

// addFeeOnly adds an empty invoice for each customer in scope with no usage
// whose plan for the period charges a fee or a minimum.
func addFeeOnly(byCustomer map[string][]InvoiceLine, req CloseRequest, prices *pricer, skip map[string]bool) error {
	if prices == nil {
		return nil
	}
	candidates := req.Registered
	if !req.All {
		candidates = []string{req.Customer}
	}
	for _, c := range candidates {
		if _, ok := byCustomer[c]; ok || skip[c] {
			continue
		}
		v, err := prices.versionFor(c, req.Period.Start.UnixMilli(), req.Period.Zone)
		if err != nil {
			return fmt.Errorf("close %s: %w", req.Period.Label, err)
		}
		if charges(v) {
			byCustomer[c] = nil
		}
	}
	return nil
}
