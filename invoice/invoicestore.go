package invoice

import (
	"context"
	"fmt"

	"github.com/hookledger/hookledger/chainhash"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// What invoicing needs from storage (store.go has the rest), and the
// invoice records as storage keeps them.

// InvoiceSource is what reading closed invoices needs.
type InvoiceSource interface {
	Invoices(ctx context.Context, f schema.InvoiceFilter) ([]schema.Invoice, error)
	GetInvoice(ctx context.Context, id int64) (*schema.Invoice, error)
	InvoiceLinesBetween(ctx context.Context, fromID, toID int64) ([]schema.InvoiceLine, error)
	creditReader
	SnapshotSource
}

// closedSource is what finding late usage reads: the closes, how far
// invoices and late lines billed each period, and the rows.
type closedSource interface {
	ledger.UsageSource
	PeriodCloses(ctx context.Context, scope string) ([]schema.PeriodClose, error)
	CloseExclusions(ctx context.Context) ([]schema.CloseExclusion, error)
	InvoiceHeads(ctx context.Context, scope string) ([]schema.InvoiceHead, error)
	LateCoverage(ctx context.Context, scope string) ([]schema.LateCoverage, error)
}

// LateSource is what LateUsage reads.
type LateSource interface {
	closedSource
	ledger.HeadSource
}

// lineSource is what checking an invoice line reads: the rows it covers and
// the period's rows up to its head.
type lineSource interface {
	ledger.UsageSource
	ScanLedger(ctx context.Context, f schema.LedgerFilter, fn func(*schema.LedgerRow) error) error
}

// TraceSource is what the dispute trace reads through the ledger: a
// *schema.ReadTx (DB.View), so the whole trace is one snapshot.
type TraceSource interface {
	lineSource
	ledger.LinkSource
	InvoiceSource
	GetLedgerRow(ctx context.Context, id int64) (*schema.LedgerRow, error)
	EventLedgerRows(ctx context.Context, provider, eventID string) ([]schema.LedgerRow, error)
	AdjustmentsOf(ctx context.Context, customer string, refs []string) ([]schema.LedgerRow, error)
	CustomerInvoiceLines(ctx context.Context, customer string) ([]schema.InvoiceLine, error)
	PeriodInvoiceLines(ctx context.Context, customer string, start, end int64) ([]schema.InvoiceLine, error)
}

// VerifySource is what Verify reads (*schema.DB).
type VerifySource interface {
	lineSource
	closedSource
	InvoiceSource
	ledger.HeadSource
	LedgerMeters(ctx context.Context, f schema.LedgerFilter) ([]string, error)
	LastLedgerID(ctx context.Context) (int64, error)
	LedgerRowHash(ctx context.Context, id int64) ([]byte, error)
	IntegrityCheck(ctx context.Context) ([]string, error)
	CountAppliedReceipts(ctx context.Context, afterID int64) (int64, error)
	AppliedWithoutUsage(ctx context.Context, afterID int64, limit int) ([]schema.EventKey, error)
	UsageWithoutApplied(ctx context.Context, afterID int64, limit int) ([]schema.EventKey, error)
	VoidRows(ctx context.Context, afterID int64, limit int) ([]schema.LedgerRow, error)
	GetLedgerRow(ctx context.Context, id int64) (*schema.LedgerRow, error)
	// The reads an incremental verify adds (verify_since.go).
	LedgerLinkBefore(ctx context.Context, id int64) (schema.Link, bool, error)
	HashBefore(ctx context.Context, table string, id int64) (int64, []byte, bool, error)
	PeriodInvoiceLines(ctx context.Context, customer string, start, end int64) ([]schema.InvoiceLine, error)
	custodySource
	sealSource
	PeriodCustomers(ctx context.Context, f schema.LedgerFilter) ([]string, error)
	// View reads in one snapshot (the usage state's check, state.go).
	View(ctx context.Context, fn func(tx *schema.ReadTx) error) error
}

// custodySource is what the custody checks read (verify_custody.go).
type custodySource interface {
	ledger.HeadSource
	ReceiptsPrunedThrough(ctx context.Context) (int64, error)
	ScanReceiptLinks(ctx context.Context, afterID int64, fn func(*ledger.ReceiptLink) error) error
	LastReceiptID(ctx context.Context) (int64, error)
	ReceiptRowHash(ctx context.Context, id int64) ([]byte, error)
	ScanStoredBodies(ctx context.Context, afterID int64, fn func(*schema.StoredBody) error) error
	ScanReplaySteps(ctx context.Context, fn func(*schema.ReplayStep) error) error
}

// sealSource is what checking the closes' seals reads (seal.go).
type sealSource interface {
	SealedCloses(ctx context.Context) ([]schema.SealedClose, []chainhash.CloseSeal, error)
	SealedInvoices(ctx context.Context, fromClose int64) (map[int64][]chainhash.SealedInvoice, error)
	LastCloseSeal(ctx context.Context) (int64, []byte, error)
	CloseSealHash(ctx context.Context, closeID int64) ([]byte, error)
	LastCredit(ctx context.Context) (schema.CreditEntry, error)
	CreditRowHash(ctx context.Context, id int64) ([]byte, error)
	CreditCrossings(ctx context.Context, customer string, limit int) ([]schema.CreditCrossing, error)
}

// AnchorSource is what reading every chain's end needs (LoadAnchors).
type AnchorSource interface {
	ledger.HeadSource
	LastCloseSeal(ctx context.Context) (int64, []byte, error)
	LastCredit(ctx context.Context) (schema.CreditEntry, error)
}

// CloseStore runs a close in one write transaction (*schema.DB).
type CloseStore interface {
	CloseTx(ctx context.Context, fn func(*schema.CloseTx) error) error
}

// closeStore is what a close does inside its transaction (*schema.CloseTx).
type closeStore interface {
	closedSource
	InvoiceSource
	ledger.HeadSource
	PeriodInvoiceLines(ctx context.Context, customer string, start, end int64) ([]schema.InvoiceLine, error)
	OverlappingCloses(ctx context.Context, start, end int64) ([]schema.PeriodClose, error)
	ClosedCustomers(ctx context.Context, start, end int64) ([]string, error)
	LedgerRowRecordedAt(ctx context.Context, id int64) (int64, error)
	InsertPeriodClose(ctx context.Context, c schema.PeriodClose) (int64, error)
	PeriodRange(ctx context.Context, f schema.LedgerFilter) (lo, hi, n int64, err error)
	ScanPeriod(ctx context.Context, s schema.PeriodScan, fn func(*schema.PeriodRow) error) error
	NextInvoiceID(ctx context.Context) (int64, error)
	InsertInvoice(ctx context.Context, inv schema.Invoice) error
	InsertInvoiceLine(ctx context.Context, l schema.InvoiceLine) error
	LastCloseSeal(ctx context.Context) (int64, []byte, error)
	InsertCloseSeal(ctx context.Context, s chainhash.CloseSeal) error
	InsertCloseExclusion(ctx context.Context, e schema.CloseExclusion) error
	creditStore
}

func invoiceOf(inv *schema.Invoice) Invoice {
	return Invoice{ID: inv.ID, CloseID: inv.CloseID, Customer: inv.Customer, Period: inv.Period, TZ: inv.TZ,
		PeriodStart: inv.PeriodStart, PeriodEnd: inv.PeriodEnd, Cutoff: inv.Cutoff, LedgerHead: inv.LedgerHead,
		ClosedAt: inv.ClosedAt, Digest: inv.Digest,
		Money: InvoiceMoney{Plan: inv.Plan, Currency: inv.Currency, Snapshot: inv.PriceSnapshot, PriceDigest: inv.PriceDigest,
			Fee: inv.Fee, TrueUp: inv.TrueUp, Total: inv.Total}}
}

// invoiceParts reads a stored invoice's parts onto inv.
func invoiceParts(inv *Invoice, rec *schema.Invoice) error {
	parts, err := decodeParts(rec.Parts)
	if err != nil {
		return fmt.Errorf("invoice %d: %w", rec.ID, err)
	}
	inv.Parts = parts
	return nil
}

func (inv *Invoice) record() schema.Invoice {
	return schema.Invoice{ID: inv.ID, CloseID: inv.CloseID, Customer: inv.Customer, Period: inv.Period, TZ: inv.TZ,
		PeriodStart: inv.PeriodStart, PeriodEnd: inv.PeriodEnd, Cutoff: inv.Cutoff, LedgerHead: inv.LedgerHead,
		ClosedAt: inv.ClosedAt, Digest: inv.Digest,
		Plan: inv.Money.Plan, Currency: inv.Money.Currency, PriceSnapshot: inv.Money.Snapshot, PriceDigest: nonNil(inv.Money.PriceDigest),
		Fee: inv.Money.Fee, TrueUp: inv.Money.TrueUp, Total: inv.Money.Total, Parts: inv.partsJSON()}
}

func lineOf(l *schema.InvoiceLine) (InvoiceLine, error) {
	q := ledger.TotalOf(ledger.Quantity(l.Quantity))
	if l.QuantityWide != "" {
		var err error
		if q, err = ledger.ParseTotal(l.QuantityWide); err != nil {
			return InvoiceLine{}, fmt.Errorf("invoice %d line %d: stored quantity: %w", l.InvoiceID, l.LineNo, err)
		}
	}
	return InvoiceLine{InvoiceID: l.InvoiceID, LineNo: l.LineNo, Customer: l.Customer, Meter: l.Meter, Dimensions: l.Dimensions,
		Aggregation: ledger.Aggregation(l.Aggregation), Property: l.Property, Unit: l.Unit, Late: l.Late, Period: l.Period, TZ: l.TZ,
		PeriodStart: l.PeriodStart, PeriodEnd: l.PeriodEnd, AfterID: l.AfterID, ThroughID: l.ThroughID,
		Quantity: q, Rows: l.Rows, Adjustments: l.Adjustments, MaxID: l.MaxID, Digest: l.Digest, PartStart: l.PartStart, PartEnd: l.PartEnd,
		Money: LineMoney{BilledBefore: l.BilledBefore, PlanVersion: l.PlanVersion, AmountPrecise: l.AmountPrecise, Amount: l.Amount, Charge: l.Charge}}, nil
}

func linesOf(ls []schema.InvoiceLine) ([]InvoiceLine, error) {
	if ls == nil {
		return nil, nil
	}
	out := make([]InvoiceLine, len(ls))
	for i := range ls {
		var err error
		if out[i], err = lineOf(&ls[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// record is the line as storage keeps it: micro-units in quantity while they
// fit an int64, else the exact decimal in quantity_wide.
func (l *InvoiceLine) record() schema.InvoiceLine {
	q, fits := l.Quantity.Micro64()
	wide := ""
	if !fits {
		wide = l.Quantity.String()
	}
	return schema.InvoiceLine{InvoiceID: l.InvoiceID, LineNo: l.LineNo, Customer: l.Customer, Meter: l.Meter, Dimensions: l.Dimensions,
		Aggregation: string(l.Aggregation), Property: l.Property, Unit: l.Unit, Late: l.Late, Period: l.Period, TZ: l.TZ,
		PeriodStart: l.PeriodStart, PeriodEnd: l.PeriodEnd, AfterID: l.AfterID, ThroughID: l.ThroughID,
		Quantity: q, QuantityWide: wide, Rows: l.Rows, Adjustments: l.Adjustments, MaxID: l.MaxID, Digest: l.Digest,
		BilledBefore: l.Money.BilledBefore, PlanVersion: l.Money.PlanVersion, AmountPrecise: l.Money.AmountPrecise, Amount: l.Money.Amount, Charge: l.Money.Charge,
		PartStart: l.PartStart, PartEnd: l.PartEnd}
}

// nonNil stores an absent digest as empty bytes: the column is NOT NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
