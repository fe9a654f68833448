package invoice

import (
	"context"
	"errors"
	"fmt"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// verifyCreditCrossings checks every credit alert that fired
// (credit_crossings) against the ledgers: the row that crossed it exists,
// is the customer's and in the crossing's month; the grant is the
// customer's, in the crossing's currency; the balance it recorded is what
// the credit ledger says the grant had then; what the month drew and what
// was left add up to it; and what was left had reached the threshold, whose
// amount is the one the threshold stands for on the grant. The draw itself
// priced the month with the plan version the crossing names, which the
// crossing does not store: that part is not recomputed. An incremental
// verify checks the crossings of ledger rows after the anchor.
func verifyCreditCrossings(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "credit crossings", From: s.From("crossed by " + s.Rows(ledger.ChainLedger, "after"))}
	xs, err := db.CreditCrossings(ctx, "", 0)
	if err != nil {
		return c, err
	}
	entries := map[string][]schema.CreditEntry{}
	for _, x := range xs {
		if x.RowID <= s.Ledger {
			continue
		}
		c.Checked++
		es, ok := entries[x.GrantID]
		if !ok {
			if es, err = db.CreditEntries(ctx, schema.CreditFilter{GrantID: x.GrantID}); err != nil {
				return c, err
			}
			entries[x.GrantID] = es
		}
		msg, err := checkCreditCrossing(ctx, db, x, es)
		if err != nil {
			return c, err
		}
		if msg != "" {
			c.Add(ledger.Problem{Table: "credit_crossings", ID: x.ID, Msg: msg})
		}
	}
	return c, nil
}

// checkCreditCrossing returns what is wrong with x ("": nothing), es being
// its grant's credit entries.
func checkCreditCrossing(ctx context.Context, db VerifySource, x schema.CreditCrossing, es []schema.CreditEntry) (string, error) {
	r, err := db.GetLedgerRow(ctx, x.RowID)
	if err != nil && !errors.Is(err, schema.ErrNotFound) {
		return "", err
	}
	switch {
	case r == nil:
		return fmt.Sprintf("ledger row %d, which crossed %s of grant %s, does not exist", x.RowID, x.Threshold, x.GrantID), nil
	case r.Customer != x.Customer || r.OccurredAt < x.PeriodStart || r.OccurredAt >= x.PeriodEnd:
		return fmt.Sprintf("ledger row %d is customer %q's at %d, not in customer %q's month [%d, %d)", x.RowID, r.Customer,
			r.OccurredAt, x.Customer, x.PeriodStart, x.PeriodEnd), nil
	}
	var then []schema.CreditEntry
	for _, e := range es {
		if e.RecordedAt <= x.CrossedAt {
			then = append(then, e)
		}
	}
	grants, problems := foldCredits(then)
	switch {
	case len(problems) > 0:
		return "", nil // the credits check reports it
	case len(grants) == 0:
		return fmt.Sprintf("grant %s, which it crossed, was not granted before %s", x.GrantID, rfc3339(x.CrossedAt)), nil
	}
	g := grants[0]
	if g.Customer != x.Customer || g.Currency != x.Currency {
		return fmt.Sprintf("grant %s is customer %q's in %s, the crossing says %q's in %s", g.ID, g.Customer, g.Currency, x.Customer, x.Currency), nil
	}
	if x.Balance != g.Balance {
		return fmt.Sprintf("records a balance of %s, the credit ledger says grant %s had %s then", x.Balance, g.ID, g.Balance), nil
	}
	dec := func(s string) (pricing.Decimal, bool) {
		d, err := pricing.ParseDecimal(s)
		return d, err == nil
	}
	balance, ok1 := dec(x.Balance)
	drawn, ok2 := dec(x.Drawn)
	available, ok3 := dec(x.Available)
	value, ok4 := dec(x.ThresholdValue)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return "an amount is not a decimal number", nil
	}
	if sum, err := pricing.Add(drawn, available); err != nil || sum.Cmp(balance) != 0 {
		return fmt.Sprintf("drawn %s and available %s do not add up to the balance %s", x.Drawn, x.Available, x.Balance), nil
	}
	if available.Cmp(value) > 0 {
		return fmt.Sprintf("%s left, above the threshold %s (%s): it had not crossed it", x.Available, x.Threshold, x.ThresholdValue), nil
	}
	if want, ok := thresholdValue(x.Threshold, g); ok && want.Cmp(value) != 0 {
		return fmt.Sprintf("threshold %s stands for %s on grant %s of %s, the crossing says %s", x.Threshold, want, g.ID, g.Amount, x.ThresholdValue), nil
	}
	return "", nil
}

// thresholdValue is the amount threshold (as configured: "25%", "10.00",
// or depleted) stands for on grant g; ok false when it cannot be read.
func thresholdValue(threshold string, g *Grant) (pricing.Decimal, bool) {
	if threshold == "depleted" {
		return pricing.NewDecimal(0, 0), true
	}
	t, err := pricing.ParseThreshold(threshold)
	if err != nil {
		return pricing.Decimal{}, false
	}
	amount, err := pricing.ParseDecimal(g.Amount)
	if err != nil {
		return pricing.Decimal{}, false
	}
	v, err := pricing.SpendThreshold(t, &amount, g.cur)
	return v, err == nil
}
