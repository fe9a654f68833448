package schema

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// The ledger's reads, on whichever handle the caller holds: DB (the read
// pool), ReadTx (one snapshot, DB.View) or CloseTx (inside a close). The queries live
// once, on ledgerReads; the handles expose them.

type ledgerReads struct{ q sqlx.QueryerContext }

// ScanUsage calls fn with every row s selects (in no particular order). The
// row is reused between calls.
func (r ledgerReads) ScanUsage(ctx context.Context, s UsageScan, fn func(*UsageRow) error) error {
	return scanUsage(ctx, r.q, s, fn)
}

// ScanLedger calls fn with every row f selects, in id order, with every
// column. The row is reused between calls; its strings and slices are not.
func (r ledgerReads) ScanLedger(ctx context.Context, f LedgerFilter, fn func(*LedgerRow) error) error {
	return scanLedger(ctx, r.q, f, fn)
}

// GetLedgerRow reads ledger row id (ErrNotFound: none).
func (r ledgerReads) GetLedgerRow(ctx context.Context, id int64) (*LedgerRow, error) {
	return getLedgerRow(ctx, r.q, id)
}

// EventLedgerRows reads an event's ledger rows in id order.
func (r ledgerReads) EventLedgerRows(ctx context.Context, provider, eventID string) ([]LedgerRow, error) {
	return eventLedgerRows(ctx, r.q, provider, eventID)
}

// AdjustmentsOf reads customer's adjustments whose ref is one of refs.
func (r ledgerReads) AdjustmentsOf(ctx context.Context, customer string, refs []string) ([]LedgerRow, error) {
	return adjustmentsOf(ctx, r.q, customer, refs)
}

// LedgerMeters lists the distinct meters of the rows f selects, sorted.
func (r ledgerReads) LedgerMeters(ctx context.Context, f LedgerFilter) ([]string, error) {
	return ledgerMeters(ctx, r.q, f)
}

// PeriodCustomers lists the distinct customers of the rows f selects, sorted.
func (r ledgerReads) PeriodCustomers(ctx context.Context, f LedgerFilter) ([]string, error) {
	return periodCustomers(ctx, r.q, f)
}

// LedgerLinks reads the chain links of the rows with these ids; ids with no
// row are absent.
func (r ledgerReads) LedgerLinks(ctx context.Context, ids []int64) (map[int64]Link, error) {
	return ledgerLinks(ctx, r.q, ids)
}

// LedgerLinkBefore reads the link of the nearest row below id (ok false: none).
func (r ledgerReads) LedgerLinkBefore(ctx context.Context, id int64) (Link, bool, error) {
	return ledgerLinkBefore(ctx, r.q, id)
}

// LedgerLinkAfter reads the link of the nearest row above id (ok false: none).
func (r ledgerReads) LedgerLinkAfter(ctx context.Context, id int64) (Link, bool, error) {
	return ledgerLinkAfter(ctx, r.q, id)
}

// LastLedgerID is the highest ledger row id (0: none).
func (r ledgerReads) LastLedgerID(ctx context.Context) (int64, error) { return lastLedgerID(ctx, r.q) }

// Invoices reads the invoices f selects, in id order, without their lines.
func (r ledgerReads) Invoices(ctx context.Context, f InvoiceFilter) ([]Invoice, error) {
	return invoices(ctx, r.q, f)
}

// GetInvoice reads invoice id without its lines (ErrNotFound: none).
func (r ledgerReads) GetInvoice(ctx context.Context, id int64) (*Invoice, error) {
	return getInvoice(ctx, r.q, id)
}

// InvoiceLinesBetween reads the lines of invoices fromID..toID, in invoice and line order.
func (r ledgerReads) InvoiceLinesBetween(ctx context.Context, fromID, toID int64) ([]InvoiceLine, error) {
	return invoiceLinesBetween(ctx, r.q, fromID, toID)
}

// CustomerInvoiceLines reads every invoice line of customer, in invoice and line order.
func (r ledgerReads) CustomerInvoiceLines(ctx context.Context, customer string) ([]InvoiceLine, error) {
	return customerInvoiceLines(ctx, r.q, customer)
}

// PeriodInvoiceLines reads every invoice line billing customer's usage of
// the event-time period [start, end), in invoice and line order.
func (r ledgerReads) PeriodInvoiceLines(ctx context.Context, customer string, start, end int64) ([]InvoiceLine, error) {
	return periodInvoiceLines(ctx, r.q, customer, start, end)
}

// PeriodCloses reads the closes that apply to customer scope ("" = every close).
func (r ledgerReads) PeriodCloses(ctx context.Context, scope string) ([]PeriodClose, error) {
	return periodCloses(ctx, r.q, scope)
}

// InvoiceHeads reads every invoice's period and ledger head, of customer
// scope only unless scope is "".
func (r ledgerReads) InvoiceHeads(ctx context.Context, scope string) ([]InvoiceHead, error) {
	return invoiceHeads(ctx, r.q, scope)
}

// LateCoverage reads, per customer and period, how far late lines billed it.
func (r ledgerReads) LateCoverage(ctx context.Context, scope string) ([]LateCoverage, error) {
	return lateCoverage(ctx, r.q, scope)
}

// ReadTx is one read-only snapshot (DB.View): reads through it agree with
// each other even while the writer commits.
type ReadTx struct {
	ledgerReads
	tx *sqlx.Tx
}

// ReadTxOf reads through tx, a transaction begun on the read pool.
func ReadTxOf(tx *sqlx.Tx) *ReadTx { return &ReadTx{ledgerReads{tx}, tx} }

// LatestHead reads the chain head in the snapshot.
func (tx *ReadTx) LatestHead(ctx context.Context) (ChainHead, error) { return latestHead(ctx, tx.tx) }

func (db *DB) reads() ledgerReads { return ledgerReads{db.Read} }

// LatestHead reads the chain head.
func (db *DB) LatestHead(ctx context.Context) (ChainHead, error) { return latestHead(ctx, db.Read) }

// ScanUsage: see ledgerReads; on the read pool.
func (db *DB) ScanUsage(ctx context.Context, s UsageScan, fn func(*UsageRow) error) error {
	return db.reads().ScanUsage(ctx, s, fn)
}

// ScanLedger: see ledgerReads; on the read pool.
func (db *DB) ScanLedger(ctx context.Context, f LedgerFilter, fn func(*LedgerRow) error) error {
	return db.reads().ScanLedger(ctx, f, fn)
}

// GetLedgerRow reads ledger row id (ErrNotFound: none).
func (db *DB) GetLedgerRow(ctx context.Context, id int64) (*LedgerRow, error) {
	return db.reads().GetLedgerRow(ctx, id)
}

// EventLedgerRows reads an event's ledger rows in id order.
func (db *DB) EventLedgerRows(ctx context.Context, provider, eventID string) ([]LedgerRow, error) {
	return db.reads().EventLedgerRows(ctx, provider, eventID)
}

// AdjustmentsOf reads customer's adjustments whose ref is one of refs.
func (db *DB) AdjustmentsOf(ctx context.Context, customer string, refs []string) ([]LedgerRow, error) {
	return db.reads().AdjustmentsOf(ctx, customer, refs)
}

// LedgerMeters lists the distinct meters of the rows f selects, sorted.
func (db *DB) LedgerMeters(ctx context.Context, f LedgerFilter) ([]string, error) {
	return db.reads().LedgerMeters(ctx, f)
}

// PeriodCustomers lists the distinct customers of the rows f selects, sorted.
func (db *DB) PeriodCustomers(ctx context.Context, f LedgerFilter) ([]string, error) {
	return db.reads().PeriodCustomers(ctx, f)
}

// LedgerLinks reads the chain links of the rows with these ids.
func (db *DB) LedgerLinks(ctx context.Context, ids []int64) (map[int64]Link, error) {
	return db.reads().LedgerLinks(ctx, ids)
}

// LedgerLinkBefore reads the link of the nearest row below id.
func (db *DB) LedgerLinkBefore(ctx context.Context, id int64) (Link, bool, error) {
	return db.reads().LedgerLinkBefore(ctx, id)
}

// LedgerLinkAfter reads the link of the nearest row above id.
func (db *DB) LedgerLinkAfter(ctx context.Context, id int64) (Link, bool, error) {
	return db.reads().LedgerLinkAfter(ctx, id)
}

// LastLedgerID is the highest ledger row id (0: none).
func (db *DB) LastLedgerID(ctx context.Context) (int64, error) { return db.reads().LastLedgerID(ctx) }

// Invoices reads the invoices f selects, in id order, without their lines.
func (db *DB) Invoices(ctx context.Context, f InvoiceFilter) ([]Invoice, error) {
	return db.reads().Invoices(ctx, f)
}

// GetInvoice reads invoice id without its lines (ErrNotFound: none).
func (db *DB) GetInvoice(ctx context.Context, id int64) (*Invoice, error) {
	return db.reads().GetInvoice(ctx, id)
}

// InvoiceLinesBetween reads the lines of invoices fromID..toID.
func (db *DB) InvoiceLinesBetween(ctx context.Context, fromID, toID int64) ([]InvoiceLine, error) {
	return db.reads().InvoiceLinesBetween(ctx, fromID, toID)
}

// CustomerInvoiceLines reads every invoice line of customer.
func (db *DB) CustomerInvoiceLines(ctx context.Context, customer string) ([]InvoiceLine, error) {
	return db.reads().CustomerInvoiceLines(ctx, customer)
}

// PeriodInvoiceLines reads every invoice line billing customer's period [start, end).
func (db *DB) PeriodInvoiceLines(ctx context.Context, customer string, start, end int64) ([]InvoiceLine, error) {
	return db.reads().PeriodInvoiceLines(ctx, customer, start, end)
}

// PeriodCloses reads the closes that apply to customer scope ("" = every close).
func (db *DB) PeriodCloses(ctx context.Context, scope string) ([]PeriodClose, error) {
	return db.reads().PeriodCloses(ctx, scope)
}

// InvoiceHeads reads every invoice's period and ledger head.
func (db *DB) InvoiceHeads(ctx context.Context, scope string) ([]InvoiceHead, error) {
	return db.reads().InvoiceHeads(ctx, scope)
}

// LateCoverage reads, per customer and period, how far late lines billed it.
func (db *DB) LateCoverage(ctx context.Context, scope string) ([]LateCoverage, error) {
	return db.reads().LateCoverage(ctx, scope)
}

// StateZone reads usage_state_zone in the snapshot (entitlements.go);
// found is false on a database older than it too.
func (r ledgerReads) StateZone(ctx context.Context) (StateZone, bool, error) {
	z, ok, err := stateZone(ctx, r.q)
	if err != nil && predates(ctx, r.q, versionEntitlements) {
		return StateZone{}, false, nil
	}
	return z, ok, err
}

// UsageState reads one usage_state row in the snapshot (found false: none).
func (r ledgerReads) UsageState(ctx context.Context, customer, meter string, periodStart int64) (UsageState, bool, error) {
	return usageState(ctx, r.q, customer, meter, periodStart)
}

// AllUsageStates reads every usage_state row, by customer, meter and period.
func (r ledgerReads) AllUsageStates(ctx context.Context) ([]UsageState, error) {
	var ss []UsageState
	err := sqlx.SelectContext(ctx, r.q, &ss, `SELECT `+usageStateCols+` FROM usage_state ORDER BY customer_id, meter, period_start`)
	return ss, err
}
