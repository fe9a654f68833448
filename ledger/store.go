package ledger

import (
	"context"

	"github.com/hookledger/hookledger/schema"
)

// What the ledger needs from storage, as small interfaces. *schema.DB (the
// read pool) provides every read one, *schema.ReadTx the reads in one
// snapshot (the dispute trace), *schema.CloseTx those of a close, and the
// writer's batch the head, the adjustment lookups and the row insert. The
// domain (which rows, in what order, what they add up to) stays here; storage
// runs the queries.

// UsageSource is what usage queries read: the rows in scope, with the
// columns aggregation needs.
type UsageSource interface {
	ScanUsage(ctx context.Context, s schema.UsageScan, fn func(*schema.UsageRow) error) error
}

// HeadSource reads the chain head.
type HeadSource interface {
	LatestHead(ctx context.Context) (schema.ChainHead, error)
}

// RefResolver resolves what an adjustment's ref names, inside the writer's
// transaction: the customer it belongs to and the event time it corrects
// (schema.ErrNotFound: it does not exist).
type RefResolver interface {
	LedgerRowOwner(ctx context.Context, id int64) (customer string, occurredAt int64, err error)
	InvoiceOwner(ctx context.Context, id int64) (customer string, periodStart int64, err error)
	EventOwner(ctx context.Context, provider, eventID, meter string) (customer string, occurredAt int64, err error)
}

// RowInserter stores one ledger row the chain has linked: the writer's
// prepared insert, bound to its batch.
type RowInserter interface {
	InsertLedgerRow(ctx context.Context, r schema.LedgerRow) error
}

// StoredRow is the domain row of a stored one.
func StoredRow(r *schema.LedgerRow) Row { return rowOf(r) }

// rowOf is the domain row of a stored one.
func rowOf(r *schema.LedgerRow) Row {
	row := Row{ID: r.ID, Kind: r.Kind, Provider: r.Provider, EventID: r.EventID, Customer: r.Customer, Meter: r.Meter,
		Quantity: RowQuantity(r.Quantity, int(r.Decimals)), Properties: r.Properties, Reason: r.Reason, Ref: r.Ref,
		OccurredAt: r.OccurredAt, RecordedAt: r.RecordedAt, PrevHash: r.PrevHash, RowHash: r.RowHash, ReceiptID: r.ReceiptID}
	q, d, _ := row.Quantity.RowParts()
	row.altered = q != r.Quantity || int64(d) != r.Decimals
	return row
}

func rowsOf(rs []schema.LedgerRow) []Row {
	out := make([]Row, len(rs))
	for i := range rs {
		out[i] = rowOf(&rs[i])
	}
	return out
}

// record is the row as storage keeps it (Chain.Append has checked that its
// quantity fits a row).
func (r *Row) record() schema.LedgerRow {
	q, d, _ := r.Quantity.RowParts()
	return schema.LedgerRow{ID: r.ID, Kind: r.Kind, Provider: r.Provider, EventID: r.EventID, Customer: r.Customer, Meter: r.Meter,
		Quantity: q, Decimals: int64(d), Properties: r.Properties, Reason: r.Reason, Ref: r.Ref,
		OccurredAt: r.OccurredAt, RecordedAt: r.RecordedAt, PrevHash: r.PrevHash, RowHash: r.RowHash, ReceiptID: r.ReceiptID}
}
