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

// Consume is usage recorded only when the customer's hard limit (or, for a
// limit of kind credit, its credit balance) allows it
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
	HasLimit bool // a limit of a quantity (hard or soft); a credit limit sets Credit instead
	// Credit is the customer's credit after the consume (a refused or
	// repeated one: as it stands) when the meter's limit is of kind
	// credit, which allows a consume only if the month's spend after it
	// stays within the credit balance.
	Credit *entitle.CreditCheck
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
		_, err = c.fits(ctx, tx, row.Customer, row.Meter, at, ledger.Total{})
		return err
	case !errors.Is(err, schema.ErrNotFound):
		return err
	}
	fits, err := c.fits(ctx, tx, row.Customer, row.Meter, at, row.Quantity)
	if err != nil {
		return err
	}
	c.Allowed = fits
	if !fits {
		// Kept, as refused: its body says so, so a replay bills nothing.
		d.EventType, d.Rows, d.Status = ledger.ConsumeRefusedType, nil, StatusIgnored
		d.Body = ledger.ConsumeBody(ledger.ConsumeRefusedType, c.ID, row.Customer, row.Meter, row.Quantity, row.OccurredAt)
		sum := sha256.Sum256(d.Body)
		d.BodySHA256 = sum[:]
		d.Error = fmt.Sprintf("refused: %s more would pass the hard limit of %s (used %s)", row.Quantity, c.Limit.Value, c.Used)
		if cr := c.Credit; cr != nil {
			d.Error = fmt.Sprintf("refused: %s more would take the month's spend to %s %s, past the credit balance of %s %s (used %s)",
				row.Quantity, cr.Spent, cr.Currency, cr.Balance, cr.Currency, c.Used)
			if _, err := c.fits(ctx, tx, row.Customer, row.Meter, at, ledger.Total{}); err != nil { // the answer: the credit as it stands
				return err
			}
		}
		return d.Apply(ctx, tx)
	}
	used := c.Used
	if err := d.Apply(ctx, tx); err != nil {
		return err
	}
	c.Used = used.Plus(row.Quantity)
	return nil
}

// fits decides a consume of q (zero: a repeat's answer) of customer's
// meter at (unix ms) and sets the answer's usage before it and limit: a
// hard limit by quantity (Tracker.Fits), a credit limit by the month's
// spend after it against the credit balance (Tracker.CreditFits).
func (c *Consume) fits(ctx context.Context, tx *Tx, customer, meter string, at int64, q ledger.Total) (bool, error) {
	fits, used, limit, hasLimit, err := tx.usage.Fits(ctx, customer, meter, at, q)
	if err != nil {
		return false, err
	}
	c.Used, c.Limit, c.HasLimit, c.Credit = used, limit, hasLimit, nil
	if hasLimit && limit.Kind == entitle.LimitCredit {
		c.HasLimit = false
		if fits, c.Credit, err = tx.usage.CreditFits(ctx, customer, meter, at, q, tx.now); err != nil {
			return false, err
		}
	}
	return fits, nil
}
