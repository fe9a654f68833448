package ledger_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// env is a real database file with a real writer whose clock the test sets.
type env struct {
	t     testing.TB
	ctx   context.Context
	db    *schema.DB
	w     *custody.Writer
	clock atomic.Int64 // unix ms; the writer's batch time
	seq   int
}

func newEnv(t testing.TB) *env {
	return newEnvAt(t, t.TempDir())
}

func newEnvAt(t testing.TB, dir string) *env {
	t.Helper()
	ctx := context.Background()
	db, err := schema.Open(ctx, filepath.Join(dir, schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, db: db}
	e.clock.Store(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	e.w = custody.NewWriter(db)
	e.w.Now = func() time.Time { return time.UnixMilli(e.clock.Load()) }
	if err := e.w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) close() {
	e.w.Close()
	e.db.Close()
}

// setClock sets the time the next batch records its rows at.
func (e *env) setClock(t time.Time) { e.clock.Store(t.UnixMilli()) }

// row describes one ledger row a test writes.
type row struct {
	customer, meter string
	qty             ledger.Quantity
	at              time.Time
	props           string // canonical JSON; "" means {}
	adjust          bool   // an adjustment instead of a usage event
}

func q(s string) ledger.Quantity {
	v, err := ledger.ParseQuantity(s)
	if err != nil {
		panic(err)
	}
	return v
}

// write appends rows in one writer batch: usage rows through the real apply
// path (a receipt per event), adjustments through Adjustment.Row + Append.
func (e *env) write(rows ...row) {
	e.t.Helper()
	if err := e.w.Submit(e.ctx, e.op(rows...)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) op(rows ...row) custody.Op {
	var ops []func(context.Context, *custody.Tx) error
	for _, r := range rows {
		e.seq++
		id := fmt.Sprintf("evt_%06d", e.seq)
		if r.props == "" {
			r.props = "{}"
		}
		if r.adjust {
			a := ledger.Adjustment{Customer: r.customer, Meter: r.meter, Quantity: r.qty, Reason: "test correction", OccurredAt: r.at}
			ops = append(ops, func(ctx context.Context, tx *custody.Tx) error {
				lr, err := a.Row(ctx, tx.Batch(), tx.Now())
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
			Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: r.at, Status: custody.StatusApplied,
			Rows:    []ledger.UsageRow{{Customer: r.customer, Meter: r.meter, Quantity: r.qty, OccurredAt: r.at, Properties: r.props}},
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

func (e *env) query(q ledger.UsageQuery) *ledger.UsageReport {
	e.t.Helper()
	rep, err := ledger.Query(e.ctx, e.db, q)
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

func mustZone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := ledger.LoadZone(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}
