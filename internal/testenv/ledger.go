package testenv

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Ledger is an Env for the ledger's own tests (ledger, invoice, verify): a
// real database file and a real writer, no server, the writer's clock at
// 2027-01-01 until the test sets it, and rows written straight through the
// writer's apply path.
type Ledger struct {
	*Env
	Ctx context.Context
	seq int
}

// NewLedger opens a Ledger on a new database (in o.Dir when it is set: it
// may hold one already).
func NewLedger(t testing.TB, o Options) *Ledger {
	t.Helper()
	o.NoServer = true
	if o.Now.IsZero() {
		o.Now = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return &Ledger{Env: New(t, o), Ctx: context.Background()}
}

// SetClock sets the time the next batch records its rows at, to the
// millisecond the ledger keeps.
func (e *Ledger) SetClock(t time.Time) { e.Clock.Set(time.UnixMilli(t.UnixMilli())) }

// Row describes one ledger row a test writes.
type Row struct {
	Customer, Meter string
	Qty             ledger.Total
	At              time.Time
	Props           string // canonical JSON; "" means {}
	Adjust          bool   // an adjustment instead of a usage event
}

// Write appends rows in one writer batch: usage rows through the real apply
// path (a receipt per event), adjustments through Adjustment.Row + Append.
func (e *Ledger) Write(rows ...Row) {
	e.T.Helper()
	if err := e.Writer.Submit(e.Ctx, e.Op(rows...)); err != nil {
		e.T.Fatal(err)
	}
}

// Op is what Write submits: the rows as one op.
func (e *Ledger) Op(rows ...Row) custody.Op {
	var ops []func(context.Context, *custody.Tx) error
	for _, r := range rows {
		e.seq++
		id := fmt.Sprintf("evt_%06d", e.seq)
		if r.Props == "" {
			r.Props = "{}"
		}
		if r.Adjust {
			a := ledger.Adjustment{Customer: r.Customer, Meter: r.Meter, Quantity: r.Qty, Reason: "test correction", OccurredAt: r.At}
			ops = append(ops, func(ctx context.Context, tx *custody.Tx) error {
				lr, err := a.Row(ctx, tx.Refs(), tx.Now())
				if err != nil {
					return err
				}
				return tx.Append(ctx, lr)
			})
			continue
		}
		body := fmt.Appendf(nil, `{"id":%q}`, id)
		sum := sha256.Sum256(body)
		d := &custody.Delivery{Provider: "test", EventID: id, EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
			Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: r.At, Status: custody.StatusApplied,
			Rows:    []ledger.UsageRow{{Customer: r.Customer, Meter: r.Meter, Quantity: r.Qty, OccurredAt: r.At, Properties: r.Props}},
			Attempt: custody.Attempt{StatusCode: 200}}
		ops = append(ops, d.Apply)
	}
	return custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		for _, op := range ops {
			if err := op(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
}

// Query runs a usage query, or fails the test.
func (e *Ledger) Query(q ledger.UsageQuery) *ledger.UsageReport {
	e.T.Helper()
	rep, err := ledger.Query(e.Ctx, e.DB, q)
	if err != nil {
		e.T.Fatal(err)
	}
	return rep
}

// Total parses an exact quantity, or panics.
func Total(s string) ledger.Total {
	v, err := ledger.ParseTotal(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Zone loads an IANA zone, or fails the test.
func Zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := ledger.LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// Time parses an RFC 3339 time, or panics.
func Time(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// BenchLedger opens the large seeded ledger HOOKLEDGER_BENCH_DB names, or
// skips the benchmark, and the month HOOKLEDGER_BENCH_MONTH picks (default
// 2026-06, mid-way through `hookledger dev seed`'s default 12 months).
func BenchLedger(b *testing.B) (db *schema.DB, month ledger.Period, label string) {
	path := os.Getenv("HOOKLEDGER_BENCH_DB")
	if path == "" {
		b.Skip("set HOOKLEDGER_BENCH_DB to a database made by `hookledger dev seed` (see the benchmark's comment)")
	}
	db, err := schema.Open(context.Background(), path, schema.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	if label = os.Getenv("HOOKLEDGER_BENCH_MONTH"); label == "" {
		label = "2026-06"
	}
	if month, err = ledger.MonthPeriod(label, time.UTC); err != nil {
		b.Fatal(err)
	}
	return db, month, label
}

// QueryPlan is how SQLite runs query (schema.DB.QueryPlan), one step a
// line, for a benchmark's log.
func QueryPlan(tb testing.TB, db *schema.DB, query string, args ...any) string {
	tb.Helper()
	steps, err := db.QueryPlan(context.Background(), query, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return "  " + strings.Join(steps, "\n  ")
}
