package bench

import (
	"context"
	"fmt"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Report is what Verify found in the ledger for one run.
type Report struct {
	Events      int `json:"events"`       // unique events sent
	Acked       int `json:"acked"`        // events with at least one 2xx answer
	ExactlyOnce int `json:"exactly_once"` // events with exactly one usage row of the right customer and quantity
	Missing     int `json:"missing"`      // events with no usage row
	ExtraRows   int `json:"extra_rows"`   // usage rows beyond one per event: what duplicates would have added
	Wrong       int `json:"wrong"`        // events whose row has the wrong customer, meter or quantity
	Receipts    int `json:"receipts"`
	Attempts    int `json:"attempts"`
	Inserted    int `json:"inserted"`
	Duplicate   int `json:"duplicate"`
	Mismatch    int `json:"payload_mismatch"`
	// Problems describes each failed check (at most a few examples per check).
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether every check passed.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Verify checks, through the ledger in db, that every unique event of the run
// produced exactly one usage row with the right customer and quantity, that
// the ledger's totals for the run's meter equal what was sent, that no
// duplicate delivery added anything, and that every acknowledged delivery left
// a delivery attempt (in its receipt if it inserted it, else a
// delivery_attempts row).
func Verify(ctx context.Context, db *schema.DB, provider string, p *Plan, o *Outcome) (*Report, error) {
	r := &Report{Events: len(p.Events)}
	for _, a := range o.Acked {
		if a {
			r.Acked++
		}
	}
	run := p.stored(provider)

	rows, err := db.UsageInRange(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("read usage rows: %w", err)
	}
	index := make(map[string]int, len(p.Events))
	for i := range p.Events {
		index[p.StoredID(i)] = i
	}
	count := make([]int, len(p.Events))
	bad := make([]bool, len(p.Events))
	var wrong []string
	for _, row := range rows {
		i, ok := index[row.EventID]
		if !ok {
			r.ExtraRows++
			continue
		}
		count[i]++
		e := p.Events[i]
		if q := ledger.RowQuantity(row.Quantity, int(row.Decimals)); row.Customer != e.Customer || row.Meter != p.Meter || !q.Equal(ledger.TotalOf(e.Quantity)) {
			r.Wrong++
			bad[i] = true
			if len(wrong) < 3 {
				wrong = append(wrong, fmt.Sprintf("%s: %s %s %s, sent %s %s %s", e.ID,
					row.Customer, row.Meter, q, e.Customer, p.Meter, e.Quantity))
			}
		}
	}
	expected := map[string]ledger.UsageLine{}
	var missing []string
	unacked := 0
	for i, c := range count {
		e := p.Events[i]
		switch {
		case c == 0:
			r.Missing++
			if !o.Acked[i] {
				unacked++
			}
			if len(missing) < 3 {
				missing = append(missing, e.ID)
			}
		case c > 1:
			r.ExtraRows += c - 1
		case !bad[i]:
			r.ExactlyOnce++
		}
		if c >= 1 {
			t := expected[e.Customer]
			t.Quantity = t.Quantity.Plus(ledger.TotalOf(e.Quantity))
			t.Events++
			expected[e.Customer] = t
		}
	}
	if r.Missing > 0 {
		r.problem("%d events are not in the ledger (%d of them were never acknowledged), e.g. %v", r.Missing, unacked, missing)
	}
	if r.ExtraRows > 0 {
		r.problem("%d usage rows beyond one per event", r.ExtraRows)
	}
	if r.Wrong > 0 {
		r.problem("%d rows differ from what was sent, e.g. %v", r.Wrong, wrong)
	}

	// The ledger's own aggregation must agree with the events sent.
	rep, err := ledger.Query(ctx, db, ledger.UsageQuery{Meter: p.Meter})
	if err != nil {
		return nil, err
	}
	got := map[string]ledger.UsageLine{}
	for _, l := range rep.Lines {
		got[l.Customer] = l
	}
	for c, want := range expected {
		if g := got[c]; !g.Quantity.Equal(want.Quantity) || g.Events != want.Events {
			r.problem("ledger total for %s: %s in %d events, sent %s in %d events", c, g.Quantity, g.Events, want.Quantity, want.Events)
		}
	}
	for c, g := range got {
		if _, ok := expected[c]; !ok {
			r.problem("ledger total for %s: %s in %d events, sent nothing", c, g.Quantity, g.Events)
		}
	}

	if r.Receipts, err = db.ReceiptsInRange(ctx, run); err != nil {
		return nil, fmt.Errorf("count receipts: %w", err)
	}
	if want := len(p.Events) - r.Missing; r.Receipts != want {
		r.problem("%d receipts for %d events in the ledger", r.Receipts, want)
	}
	outcomes, err := db.AttemptOutcomesInRange(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("count delivery attempts: %w", err)
	}
	for _, n := range outcomes {
		r.Attempts += n
	}
	r.Inserted, r.Duplicate, r.Mismatch = outcomes["inserted"], outcomes["duplicate"], outcomes["payload_mismatch"]
	if r.Inserted != r.Receipts {
		r.problem("%d attempts recorded as inserted for %d receipts", r.Inserted, r.Receipts)
	}
	if r.Mismatch > 0 {
		r.problem("%d duplicates recorded as payload_mismatch, but every duplicate carried its original's body", r.Mismatch)
	}
	// Every 2xx answer follows the commit of its attempt.
	if r.Attempts < o.Delivered {
		r.problem("%d delivery attempts recorded for %d deliveries answered 2xx", r.Attempts, o.Delivered)
	}
	return r, nil
}

// stored selects the run's events in the ledger: sequential ids are one
// contiguous range of the (provider, event_id) index; random ones, spread
// over all of it among other events, are looked up by id.
func (p *Plan) stored(provider string) schema.EventRange {
	if p.IDs == Sequential {
		return schema.EventRange{Provider: provider,
			From: p.storedAs(EventID(p.RunID, 0)), To: p.storedAs(EventID(p.RunID, len(p.Events)))}
	}
	ids := make([]string, len(p.Events))
	for i := range p.Events {
		ids[i] = p.StoredID(i)
	}
	return schema.EventRange{Provider: provider, IDs: ids}
}
