package invoice

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/chainhash"
	"github.com/hookledger/hookledger/schema"
)

// A preview is the close's own computation (closeTx) run on a read-only
// snapshot: the reads a close makes, through the same closeStore, with its
// writes dropped. It takes no write lock, so the console (which opens the
// database read-only) shows a customer's draft invoice from the very code
// `invoice close` runs, and a preview never waits for, nor holds up, the
// writer.
//
// What a close reads never depends on what it wrote before in the same
// transaction: the close row it inserts is for the period it closes, which
// lateLines skips (no invoice bills late usage of its own period), and each
// invoice is priced before it is inserted, from earlier closes' invoices
// only. So the dropped writes change nothing the preview computes; the ids
// it shows are those the close would take (MAX + 1 in the snapshot, as
// InsertPeriodClose and NextInvoiceID choose them).

// PreviewStore reads a preview's snapshot (*schema.DB).
type PreviewStore interface {
	View(ctx context.Context, fn func(tx *schema.ReadTx) error) error
}

// Preview is the invoices req's close would produce if it ran now, priced
// (invoice preview, GET /v1/customers/{id}/preview, the console's draft),
// even before the period has ended; for a period already closed for the
// scope it is the closed invoices (Existing). It writes nothing and takes no
// write lock. Its cutoff and head are those of the snapshot it reads: rows
// committed while it runs are not in it, as they would not be in a close
// that began first.
func Preview(ctx context.Context, db PreviewStore, req CloseRequest) (*CloseResult, error) {
	if req.All == (req.Customer != "") {
		return nil, errors.New("preview: name one customer or all customers")
	}
	if req.Now == nil {
		req.Now = time.Now
	}
	req.Preview, req.DryRun = true, true
	var res *CloseResult
	err := db.View(ctx, func(tx *schema.ReadTx) error {
		var err error
		res, err = closeTx(ctx, &previewTx{ReadTx: tx}, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	if res.Invoices == nil {
		res.Invoices = []Invoice{}
	}
	return res, nil
}

// previewTx is a close's store over a snapshot: its reads are the
// snapshot's, its writes do nothing.
type previewTx struct {
	*schema.ReadTx
}

var _ closeStore = (*previewTx)(nil)

// InsertPeriodClose stores nothing and returns the id the close would get.
func (p *previewTx) InsertPeriodClose(ctx context.Context, _ schema.PeriodClose) (int64, error) {
	id, err := p.NextCloseID(ctx)
	if err != nil {
		return 0, fmt.Errorf("next close id: %w", err)
	}
	return id, nil
}

func (*previewTx) InsertInvoice(context.Context, schema.Invoice) error         { return nil }
func (*previewTx) InsertCreditEntry(context.Context, schema.CreditEntry) error { return nil }
func (*previewTx) InsertCloseExclusion(context.Context, schema.CloseExclusion) error {
	return nil
}
func (*previewTx) InsertInvoiceLine(context.Context, schema.InvoiceLine) error { return nil }
func (*previewTx) InsertCloseSeal(context.Context, chainhash.CloseSeal) error  { return nil }
