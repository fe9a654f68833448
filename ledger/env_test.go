package ledger_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// env is a real database file with a real writer whose clock the test sets.
type env struct {
	*testenv.Env
	ctx context.Context
	seq int
}

func newEnv(t testing.TB) *env {
	return newEnvAt(t, t.TempDir())
}

// newEnvAt opens the database in dir, which may hold one already.
func newEnvAt(t testing.TB, dir string) *env {
	t.Helper()
	return &env{Env: testenv.New(t, testenv.Options{Dir: dir, NoServer: true, Now: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}),
		ctx: context.Background()}
}

// setClock sets the time the next batch records its rows at, to the
// millisecond the ledger keeps.
func (e *env) setClock(t time.Time) { e.Clock.Set(time.UnixMilli(t.UnixMilli())) }

// row describes one ledger row a test writes.
type row struct {
	customer, meter string
	qty             ledger.Total
	at              time.Time
	props           string // canonical JSON; "" means {}
	adjust          bool   // an adjustment instead of a usage event
}

func q(s string) ledger.Total {
	v, err := ledger.ParseTotal(s)
	if err != nil {
		panic(err)
	}
	return v
}

// write appends rows in one writer batch: usage rows through the real apply
// path (a receipt per event), adjustments through Adjustment.Row + Append.
func (e *env) write(rows ...row) {
	e.T.Helper()
	if err := e.Writer.Submit(e.ctx, e.op(rows...)); err != nil {
		e.T.Fatal(err)
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
	e.T.Helper()
	rep, err := ledger.Query(e.ctx, e.DB, q)
	if err != nil {
		e.T.Fatal(err)
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
