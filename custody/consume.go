package custody

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Consume is usage recorded only when the customer's hard limit allows it
// (POST /v1/entitlements/{customer}/{meter}/consume): the check and the row
// are one op in the writer's transaction, which holds the write lock, so
// no other usage moves the total between them, and concurrent consumers
// can never pass a limit together. Delivery is the consume's event
// (ledger.ConsumeBody, type ledger.ConsumeType, classified: one row).
//
// Every consume keeps its receipt: an allowed one with its usage row, a
// refused one under ledger.ConsumeRefusedType with none. A repeat of its
// id answers what the first did and writes nothing.
type Consume struct {
	Delivery *Delivery
	ID       string // the consume's id, as the caller gave it

	// The answer, set by Apply.
	Allowed   bool
	Duplicate bool
	// Conflict is set when the id was consumed for another customer or
	// meter (customer/meter): nothing is written or answered of it.
	Conflict string
	Used     ledger.Total // the period's usage after the consume
	Limit    entitle.Limit
	HasLimit bool
}

// Apply implements Op.
func (c *Consume) Apply(ctx context.Context, tx *Tx) error {
	d := c.Delivery
	if d.Status != StatusApplied || len(d.Rows) != 1 {
		return fmt.Errorf("consume %s: %s", d.EventID, d.Error)
	}
	row := d.Rows[0]
	at := row.OccurredAt.UnixMilli()
	stored, err := tx.b.GetReceipt(ctx, d.Provider, d.EventID)
	switch {
	case err == nil:
		// (A body retention pruned says nothing: the id answers as it is.)
		if customer, meter := ledger.ConsumeOf(stored.Body); stored.Body != nil && (customer != row.Customer || meter != row.Meter) {
			c.Conflict = customer + "/" + meter
			return nil
		}
		c.Duplicate, c.Allowed = true, stored.EventType == ledger.ConsumeType && stored.Status == string(StatusApplied)
		_, c.Used, c.Limit, c.HasLimit, err = tx.usage.Fits(ctx, row.Customer, row.Meter, at, ledger.Total{})
		return err
	case !errors.Is(err, schema.ErrNotFound):
		return err
	}
	fits, used, limit, hasLimit, err := tx.usage.Fits(ctx, row.Customer, row.Meter, at, row.Quantity)
	if err != nil {
		return err
	}
	c.Allowed, c.Used, c.Limit, c.HasLimit = fits, used, limit, hasLimit
	if !fits {
		// Kept, as refused: its body says so, so a replay bills nothing.
		d.EventType, d.Rows, d.Status = ledger.ConsumeRefusedType, nil, StatusIgnored
		d.Body = ledger.ConsumeBody(ledger.ConsumeRefusedType, c.ID, row.Customer, row.Meter, row.Quantity, row.OccurredAt)
		sum := sha256.Sum256(d.Body)
		d.BodySHA256 = sum[:]
		d.Error = fmt.Sprintf("refused: %s more would pass the hard limit of %s (used %s)", row.Quantity, limit.Value, used)
		return d.Apply(ctx, tx)
	}
	if err := d.Apply(ctx, tx); err != nil {
		return err
	}
	c.Used = used.Plus(row.Quantity)
	return nil
}
