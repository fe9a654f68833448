package schema

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/ledger"
)

// migrationSteps are Go code a migration needs after its SQL, in the same
// transaction: SQLite has no SHA-256 to compute hashes with.
var migrationSteps = map[int]func(context.Context, *sqlx.Tx) error{
	5: chainReceipts,
}

// chainReceipts links every existing receipt in id order, as the writer would
// have, and moves the chain head to the last. The order and the hashed facts
// depend only on the stored rows, so the same database always chains alike.
// Receipts deleted before (retention) leave id gaps; each receipt links to
// the one before it that exists, so verify sees the link hold across the gap.
func chainReceipts(ctx context.Context, tx *sqlx.Tx) error {
	update, err := tx.PreparexContext(ctx, `UPDATE receipts SET prev_hash = ?, row_hash = ? WHERE id = ?`)
	if err != nil {
		return err
	}
	defer update.Close()
	head := ledger.Chain{LastHash: ledger.GenesisHash}
	// Updating rows behind the rowid-ordered cursor is safe in SQLite: the
	// ids do not change, so no row moves ahead of the scan.
	err = ledger.EachReceiptLink(ctx, tx, func(l *ledger.ReceiptLink) error {
		l.PrevHash = head.LastHash
		l.RowHash = l.Hash(l.PrevHash)
		if _, err := update.ExecContext(ctx, l.PrevHash, l.RowHash, l.ID); err != nil {
			return fmt.Errorf("chain receipt %d: %w", l.ID, err)
		}
		head.Advance(l)
		return nil
	})
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE chain_head SET receipt_id = ?, receipt_hash = ? WHERE id = 1`, head.LastID, head.LastHash)
	return err
}
