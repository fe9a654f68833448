package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/schema"
)

// serve's credit expiry job: at start it writes the expiry row of every
// grant past its expiry, forfeiting what it had left, logs each, and stops
// with the other jobs; a later run writes each row once; a failed run is a
// warning.
func TestCreditExpiryJob(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := testenv.New(t, testenv.Options{Backend: backend})
		ctx := context.Background()
		now := e.Clock.Now()
		for _, r := range []invoice.GrantRequest{
			{ID: "soon", Currency: "USD", Amount: "10.00", ExpiresAt: now.Add(time.Hour).UnixMilli()},
			{ID: "later", Currency: "EUR", Amount: "7.50", ExpiresAt: now.Add(48 * time.Hour).UnixMilli()},
			{ID: "never", Currency: "USD", Amount: "3.00"},
		} {
			r.Customer, r.Reason, r.Actor = "cus_1", "test", "ana"
			if err := e.Writer.Submit(ctx, &custody.GrantCredit{Request: r}); err != nil {
				t.Fatal(err)
			}
		}
		rows := func() []string {
			es, err := e.DB.CreditEntries(ctx, schema.CreditFilter{})
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, x := range es {
				out = append(out, fmt.Sprint(x.Kind, " ", x.GrantID, " ", x.Amount, " ", x.Currency, " ", x.Balance, " ", x.Actor))
			}
			return out
		}
		grants := []string{"grant soon 10.00 USD 10.00 ana", "grant later 7.50 EUR 7.50 ana", "grant never 3.00 USD 3.00 ana"}

		e.Clock.Add(2 * time.Hour) // past soon's expiry
		var logs testenv.Buffer
		log := slog.New(slog.NewJSONHandler(&logs, nil))
		stop, err := startBackground(ctx, log, e.Config, e.DB, e.Writer, e.Mapper(), "test", nil)
		if err != nil {
			t.Fatal(err)
		}
		await.Eventually(t, 10*time.Second, "the expiry row written at start", func() bool { return len(rows()) == 4 })
		stop()
		want := append(grants, "expiry soon 10.00 USD 0.00 hookledger")
		if got := rows(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("credit rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		const soon = `"msg":"credit expired","grant":"soon","customer":"cus_1","forfeited":"10.00","currency":"USD"`
		if out := logs.String(); strings.Count(out, soon) != 1 || strings.Contains(out, `"level":"WARN"`) {
			t.Errorf("the job's log:\n%s", out)
		}

		// Run again: nothing more is due. Two days on, later is.
		expireCredits(ctx, log, e.Writer)
		if got := len(rows()); got != 4 {
			t.Errorf("a second run wrote %d rows", got-4)
		}
		e.Clock.Add(48 * time.Hour)
		expireCredits(ctx, log, e.Writer)
		want = append(want, "expiry later 7.50 EUR 0.00 hookledger")
		if got := rows(); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("credit rows two days on:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		out := logs.String()
		if strings.Count(out, `"msg":"credit expired"`) != 2 || strings.Count(out, soon) != 1 ||
			!strings.Contains(out, `"grant":"later","customer":"cus_1","forfeited":"7.50","currency":"EUR"`) {
			t.Errorf("the log two days on:\n%s", out)
		}
		gs, err := invoice.Grants(ctx, e.DB, "cus_1", e.Clock.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		var st []string
		for _, g := range gs {
			st = append(st, g.ID+" "+g.Status+" "+g.Balance)
		}
		if got := strings.Join(st, ", "); got != "soon expired 0.00, later expired 0.00, never active 3.00" {
			t.Errorf("grants after the expiries: %s", got)
		}
	})
}

// failingWriter fails every operation with err, an expiry having written
// entries first (as one committed but not yet replicated has).
type failingWriter struct {
	err     error
	entries []schema.CreditEntry
}

func (f failingWriter) Submit(_ context.Context, op custody.Op) error {
	if x, ok := op.(*custody.ExpireCredits); ok {
		x.Entries = f.entries
	}
	return f.err
}

// A run that fails is a warning naming the error; one cut short by
// shutdown is not. Expiries committed but not yet replicated are logged.
func TestCreditExpiryJobFailure(t *testing.T) {
	var logs testenv.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	expireCredits(context.Background(), log, failingWriter{err: custody.ErrQueueFull})
	if out := logs.String(); !strings.Contains(out, `"level":"WARN","msg":"credit expiry","error":"writer queue is full"`) ||
		strings.Contains(out, "credit expired") {
		t.Errorf("a failed run's log:\n%s", out)
	}
	var unreplicated testenv.Buffer
	expireCredits(context.Background(), slog.New(slog.NewJSONHandler(&unreplicated, nil)), failingWriter{err: custody.ErrNotReplicated,
		entries: []schema.CreditEntry{{Kind: invoice.CreditExpired, GrantID: "g1", Customer: "cus_1", Amount: "4.00", Currency: "USD"}}})
	if out := unreplicated.String(); !strings.Contains(out, `"level":"INFO","msg":"credit expired","grant":"g1","customer":"cus_1","forfeited":"4.00","currency":"USD"`) ||
		!strings.Contains(out, `"level":"WARN","msg":"credit expiry","error":"committed locally`) {
		t.Errorf("an expiry committed but not replicated:\n%s", out)
	}
	var quiet testenv.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	expireCredits(ctx, slog.New(slog.NewJSONHandler(&quiet, nil)), failingWriter{err: errors.Join(custody.ErrClosed, ctx.Err())})
	if out := quiet.String(); out != "" {
		t.Errorf("a run cut short by shutdown logged:\n%s", out)
	}
}
