package invoice

import (
	"context"
	"fmt"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// verifySpendCrossings checks every spend threshold that fired against the
// ledger: the row that crossed it exists, is the customer's, falls in the
// period and adds to a meter the recorded plan version prices; and the
// spend at that row, recomputed from the ledger's rows of the period up to
// it with the stored version (pricing.Plan.Spent), is what the crossing
// recorded and is at or past the threshold's amount.
//
// It reads in one snapshot, like the usage state's check. An incremental
// verify checks the crossings of ledger rows after the anchor.
func verifySpendCrossings(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "spend crossings", From: s.From("crossed by " + s.Rows(ledger.ChainLedger, "after"))}
	err := db.View(ctx, func(tx *schema.ReadTx) error {
		cs, err := tx.SpendCrossings(ctx)
		if err != nil {
			return err
		}
		for _, x := range cs {
			if x.RowID <= s.Ledger {
				continue
			}
			c.Checked++
			if msg, err := checkSpendCrossing(ctx, tx, x); err != nil {
				return err
			} else if msg != "" {
				c.Add(ledger.Problem{Table: "spend_crossings", ID: x.ID, Msg: msg})
			}
		}
		return nil
	})
	return c, err
}

// checkSpendCrossing returns what is wrong with x, in verify's words ("":
// nothing).
func checkSpendCrossing(ctx context.Context, tx *schema.ReadTx, x schema.SpendCrossing) (string, error) {
	v, err := pricing.ParseSnapshot([]byte(x.PlanSnapshot))
	if err != nil {
		return err.Error(), nil
	}
	if key := v.Name + "@" + string(v.EffectiveFrom); key != x.Plan || v.Currency != x.Currency {
		return fmt.Sprintf("says plan %s in %s, its snapshot is %s in %s", x.Plan, x.Currency, key, v.Currency), nil
	}
	var row *schema.UsageRow
	err = tx.ScanUsage(ctx, schema.UsageScan{Filter: schema.LedgerFilter{AfterID: x.RowID - 1, ThroughID: x.RowID}}, func(r *schema.UsageRow) error {
		cp := *r
		row = &cp
		return nil
	})
	if err != nil {
		return "", err
	}
	switch {
	case row == nil:
		return fmt.Sprintf("ledger row %d, which crossed %s, does not exist", x.RowID, x.Threshold), nil
	case row.Customer != x.Customer || row.OccurredAt < x.PeriodStart || row.OccurredAt >= x.PeriodEnd:
		return fmt.Sprintf("ledger row %d is customer %q's at %d, not in customer %q's period [%d, %d)", x.RowID, row.Customer,
			row.OccurredAt, x.Customer, x.PeriodStart, x.PeriodEnd), nil
	case v.Price(row.Meter) == nil:
		return fmt.Sprintf("ledger row %d is of meter %q, which %s does not price", x.RowID, row.Meter, x.Plan), nil
	}
	sums := map[string]ledger.Total{}
	err = tx.ScanUsage(ctx, schema.UsageScan{Filter: schema.LedgerFilter{Customer: x.Customer, From: x.PeriodStart, To: x.PeriodEnd,
		ThroughID: x.RowID}}, func(r *schema.UsageRow) error {
		if v.Price(r.Meter) != nil {
			sums[r.Meter] = sums[r.Meter].Plus(ledger.RowQuantity(r.Quantity, int(r.Decimals)))
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	totals := make(map[string]pricing.Decimal, len(sums))
	for m, q := range sums {
		totals[m] = q.Decimal()
	}
	spent, err := v.Spent(totals)
	if err != nil {
		return err.Error(), nil
	}
	threshold, err := pricing.ParseDecimal(x.ThresholdValue)
	if err != nil {
		return fmt.Sprintf("threshold value %q is not an amount", x.ThresholdValue), nil
	}
	switch {
	case spent.Total.String() != x.Spent:
		return fmt.Sprintf("spend at row %d recomputes to %s %s, the crossing says %s", x.RowID, spent.Total, x.Currency, x.Spent), nil
	case spent.Total.Cmp(threshold) < 0:
		return fmt.Sprintf("spend at row %d is %s %s, below threshold %s (%s)", x.RowID, spent.Total, x.Currency, x.Threshold, x.ThresholdValue), nil
	}
	return "", nil
}
