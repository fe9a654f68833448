package forward_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/internal/writer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

const stripeKey = "sk_test_51HookledgerSecretKeyThatMustNeverLeak"

// stripeConfig pushes meter api_requests (mode, multiplier) to base.
func stripeConfig(base, mode, multiplier string) func(*config.Config) {
	return func(c *config.Config) {
		m := pricing.MustDecimal(multiplier)
		c.Meters = []config.Meter{{Name: "api_requests", Aggregation: ledger.AggSum,
			Stripe: &ledger.StripeMeter{EventName: "api_requests", Mode: mode, Multiplier: &m}}}
		s := &config.Stripe{APIKey: config.Secret{Value: stripeKey}, APIBase: base, Customers: config.StripeIdentity,
			MaxAttempts: 50, Concurrency: 4}
		s.Timeout.Duration = 2 * time.Second
		s.MaxAge.Duration = time.Hour
		s.Backoff.Duration = 20 * time.Millisecond
		s.MaxBackoff.Duration = 100 * time.Millisecond
		c.Stripe = s
	}
}

// stripeEnv is a write path pushing to base, with a running relay whose log
// goes to the returned buffer.
func stripeEnv(t *testing.T, base, mode, multiplier string, more ...func(*config.Config)) (*testenv.Env, *forward.Relay, *syncBuffer) {
	t.Helper()
	e := testenv.New(t, testenv.Options{RealTime: true, Edits: append([]func(*config.Config){stripeConfig(base, mode, multiplier)}, more...)})
	log := &syncBuffer{}
	r := &forward.Relay{DB: e.DB, Writer: e.Writer, Stripe: e.Config.Stripe, Pushes: e.DB, Poll: 50 * time.Millisecond, Sole: true,
		Log: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return e, r, log
}

// rowsPushed is how many ledger rows (stream) and invoice lines (close) the
// pushes whose messages are in status cover: a stream push carries the
// rows its customer's meter appended while it was open.
func rowsPushed(e *testenv.Env, status string) int {
	return e.Int(`SELECT COALESCE(SUM(p.row_count), 0) FROM outbox o JOIN stripe_pushes p ON p.id = o.push_id
		WHERE o.destination = 'stripe' AND o.status = ?`, status)
}

// 0.25 units × 7 events with multiplier 1: every push is a whole number,
// the remainder is carried, and what Stripe holds adds up to the ledger's
// 1.75 rounded once (2), not to 7 × round(0.25) = 0.
func TestStripeStreamCarriesTheRemainder(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeStream, "1")
	for i := range 7 {
		if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", "0.25")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	await.Eventually(t, 10*time.Second, "7 pushes delivered", func() bool { return rowsPushed(e, "delivered") == 7 })
	if got := fake.Totals()[[2]string{"cus_1", "api_requests"}]; got == nil || got.Cmp(big.NewInt(2)) != 0 {
		t.Errorf("Stripe holds %v for cus_1, want 2 (1.75 rounded once)", got)
	}
	// The pushes the relay found pending together went as one meter event
	// (stripe.Plan): at most one per push, each stored as a send first.
	if n, sends := len(fake.Snapshot()), e.Int(`SELECT COUNT(DISTINCT identifier) FROM stripe_sends`); n == 0 || n > 7 || n != sends {
		t.Errorf("Stripe holds %d events for %d sends, want as many, between 1 and 7", n, sends)
	}
	if n, rows := e.Count("stripe_pushes"), e.Int(`SELECT SUM(row_count) FROM stripe_pushes`); n == 0 || n > 7 || rows != 7 {
		t.Errorf("%d pushes covering %d rows, want between 1 and 7 covering the 7", n, rows)
	}
	var total, pushed string
	e.DB.Read.QueryRow(`SELECT total, pushed FROM stripe_pushes ORDER BY id DESC LIMIT 1`).Scan(&total, &pushed)
	if total != "1.750000" || pushed != "2" {
		t.Errorf("last push carries total %s pushed %s, want 1.750000 and 2", total, pushed)
	}
}

// The rows a customer's meter appends while the relay is stopped are one
// push, one meter event: each row is added to the open push in its own
// transaction. The relay's claim closes it: the trigger refuses any edit
// after that, and the next row starts a push of its own, which carries
// the period's running totals on.
func TestStripeStreamRowsJoinTheOpenPush(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, relay, _ := stripeEnv(t, fake.URL, ledger.StripeStream, "1")
	relay.Close()
	for i := range 5 {
		if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", "0.5")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	var rows, first, last, open int
	var quantity, value string
	e.DB.Read.QueryRow(`SELECT p.row_count, p.ledger_id, p.last_ledger_id, p.quantity, p.value, o.open
		FROM stripe_pushes p JOIN outbox o ON o.push_id = p.id`).Scan(&rows, &first, &last, &quantity, &value, &open)
	if n := e.Count("stripe_pushes"); n != 1 || rows != 5 || last-first != 4 || quantity != "2.500000" || value != "2" || open != 1 {
		t.Fatalf("%d pushes, the first covering %d rows (%d to %d), quantity %s, value %s, open %d; want one open push of the 5 rows, 2.5 rounded half to even (2)",
			n, rows, first, last, quantity, value, open)
	}
	relay = &forward.Relay{DB: e.DB, Writer: e.Writer, Stripe: e.Config.Stripe, Pushes: e.DB, Poll: 50 * time.Millisecond, Sole: true,
		Log: slog.New(slog.NewTextHandler(&syncBuffer{}, nil))}
	if err := relay.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)
	await.Eventually(t, 10*time.Second, "the push delivered", func() bool { return rowsPushed(e, "delivered") == 5 })
	msgs, err := forward.List(context.Background(), e.DB, schema.OutboxFilter{Destination: "stripe"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("usage row:%d (+4 rows to row:%d)", first, last); len(msgs) != 1 || msgs[0].Push.Whose() != want {
		t.Errorf("forward list shows %d messages, the first %q, want one of %q", len(msgs), msgs[0].Push.Whose(), want)
	}
	if _, err := e.DB.Write.Exec(`UPDATE stripe_pushes SET value = '4'`); err == nil || !strings.Contains(err.Error(), "never edited") {
		t.Errorf("editing a claimed push: %v, want refused", err)
	}
	if r := e.Send("evt_5", testenv.UsageBody("cus_1", "api_requests", "0.5")); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	await.Eventually(t, 10*time.Second, "the next push delivered", func() bool { return rowsPushed(e, "delivered") == 6 })
	if n := e.Count("stripe_pushes"); n != 2 {
		t.Errorf("%d pushes, want the claimed one and the next row's", n)
	}
	events := fake.Snapshot()
	if got := fake.Totals()[[2]string{"cus_1", "api_requests"}]; len(events) != 2 || got == nil || got.Cmp(big.NewInt(3)) != 0 {
		t.Errorf("Stripe holds %d events summing to %v, want 2 summing to 3 (3 rounded once)", len(events), got)
	}
}

// Rows that join an open push in a batch are stored with one UPDATE when
// the batch flushes, and the writer flushes before every op that is not a
// delivery: a relay's claim queued between a customer's rows in one batch
// closes the push carrying the rows before it (2 here), and the row after
// it starts the next push. Without that flush the claim would close the
// push as its first row left it, and the batch fail on the trigger that
// refuses an edit of a claimed push.
func TestStripeStreamClaimInTheBatchTakesItsRows(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		fake := fakestripe.Serve(t, stripeKey)
		e := testenv.New(t, testenv.Options{Backend: backend, RealTime: true,
			Edits: []func(*config.Config){stripeConfig(fake.URL, ledger.StripeStream, "1")}})
		started, release, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			held <- e.Writer.Submit(context.Background(), custody.OpFunc(func(context.Context, *custody.Tx) error {
				close(started)
				<-release
				return nil
			}))
		}()
		<-started
		var wg sync.WaitGroup
		codes := make([]int, 3)
		queue := func(i int, fn func()) {
			wg.Add(1)
			go func() { defer wg.Done(); fn() }()
			await.Eventually(t, 10*time.Second, "op queued", func() bool { return e.Writer.Depth() == i+1 })
		}
		send := func(i int) func() {
			return func() {
				codes[i] = e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", "0.5")).Code
			}
		}
		var claimed []schema.OutboxClaim
		var claimErr error
		queue(0, send(0))
		queue(1, send(1))
		queue(2, func() {
			claimErr = e.Writer.Submit(context.Background(), custody.OpFunc(func(ctx context.Context, tx *custody.Tx) (err error) {
				claimed, err = tx.Outbox().ClaimOutbox(ctx, "stripe", tx.Now(), tx.Now()+60_000, 10)
				return err
			}))
		})
		queue(3, send(2))
		close(release)
		wg.Wait()
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if claimErr != nil || len(claimed) != 1 || codes[0] != 200 || codes[1] != 200 || codes[2] != 200 {
			t.Fatalf("claim: %d claimed, %v; sends %v", len(claimed), claimErr, codes)
		}
		got := ""
		rows, err := e.DB.Read.Query(`SELECT p.row_count, p.quantity, p.value, o.open FROM stripe_pushes p JOIN outbox o ON o.push_id = p.id ORDER BY p.id`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n, open int
			var q, v string
			if err := rows.Scan(&n, &q, &v, &open); err != nil {
				t.Fatal(err)
			}
			got += fmt.Sprintf("[%d rows %s value %s open %d]", n, q, v, open)
		}
		if want := "[2 rows 1.000000 value 1 open 0][1 rows 0.500000 value 1 open 1]"; got != want {
			t.Errorf("pushes %s, want %s: the claimed push carries the two rows before the claim", got, want)
		}
	})
}

// An op that appends a usage row, which joins the open push in memory, and
// then a correction of the same meter: the correction's push reads the
// period's last push from the database, so the batch stores the joined row
// first, and the correction's running total goes on from it (1.0 − 0.25).
func TestStripeStreamCorrectionAfterAJoinInOneOp(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e := testenv.New(t, testenv.Options{RealTime: true, Edits: []func(*config.Config){stripeConfig(fake.URL, ledger.StripeStream, "1")}})
	if r := e.Send("evt_0", testenv.UsageBody("cus_1", "api_requests", "0.5")); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	if err := e.Writer.Submit(t.Context(), custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		u := &ledger.Row{Kind: ledger.KindUsage, Provider: "default", EventID: "evt_1", Customer: "cus_1", Meter: "api_requests",
			Quantity: mustRowQuantity(t, "0.5"), Properties: "{}", OccurredAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).UnixMilli(), RecordedAt: tx.Now()}
		if err := tx.Append(ctx, u); err != nil {
			return err
		}
		adj := ledger.Adjustment{Customer: "cus_1", Meter: "api_requests", Quantity: mustRowQuantity(t, "-0.25"), Reason: "test", Ref: "event:default/evt_0"}
		a, err := adj.Row(ctx, tx.Refs(), tx.Now())
		if err != nil {
			return err
		}
		return tx.Append(ctx, a)
	})); err != nil {
		t.Fatal(err)
	}
	if got, want := pushRows(t, e), "usage 2 1.000000 1.000000 1; adjustment 1 -0.250000 0.750000 1; "; got != want {
		t.Errorf("pushes %q, want %q (source, rows, quantity, total, pushed)", got, want)
	}
}

// The writer keeps where each customer's meter stands from one batch to
// the next, so a usage row joins the open push without reading it. A
// commit of another connection (a command's writer, in another process:
// here an adjustment, whose push comes after the open one) makes it read
// again: the next usage row starts a push after the adjustment's, and the
// latest push carries the ledger's total. Kept as it was, the open push
// would have taken the row and left the adjustment's push, the latest,
// behind the ledger.
func TestStripeStreamSeesAnotherWriter(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	// SQLite's: on PostgreSQL the writer keeps nothing across batches.
	e := testenv.New(t, testenv.Options{Backend: "sqlite", RealTime: true,
		Edits: []func(*config.Config){stripeConfig(fake.URL, ledger.StripeStream, "1")}})
	if r := e.Send("evt_a", testenv.UsageBody("cus_1", "api_requests", "2")); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	other, err := schema.Open(t.Context(), filepath.Join(e.Dir, schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	w := writer.New(other, e.Config)
	if err := w.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := ledger.Adjustment{Customer: "cus_1", Meter: "api_requests", Quantity: mustRowQuantity(t, "-1"), Reason: "test", Ref: "event:default/evt_a"}
	appendAdjustment(t, w, a)
	w.Close()
	if r := e.Send("evt_b", testenv.UsageBody("cus_1", "api_requests", "3")); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	if got, want := pushRows(t, e), "usage 1 2.000000 2.000000 2; adjustment 1 -1.000000 1.000000 1; usage 1 3.000000 4.000000 4; "; got != want {
		t.Errorf("pushes %q, want %q", got, want)
	}
}

// pushRows lists the pushes in order: source, rows, quantity, total and
// what was pushed, each followed by "; ".
func pushRows(t *testing.T, e *testenv.Env) string {
	t.Helper()
	got := ""
	rows, err := e.DB.Read.Query(`SELECT source, row_count, quantity, total, pushed FROM stripe_pushes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var source, quantity, total, pushed string
		var n int
		if err := rows.Scan(&source, &n, &quantity, &total, &pushed); err != nil {
			t.Fatal(err)
		}
		got += fmt.Sprintf("%s %d %s %s %s; ", source, n, quantity, total, pushed)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// In close mode the invoice line is pushed once, with its total rounded
// once: the same 2.
func TestStripeCloseModePushesTheLine(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeClose, "1")
	for i := range 7 {
		if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", "0.25")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	if n := e.Count("stripe_pushes"); n != 0 {
		t.Fatalf("%d pushes before the close, want none in close mode", n)
	}
	// The period closes once it has ended: November 2026 (the events' month), now.
	p, err := ledger.MonthPeriod("2026-11", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	res, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: p, All: true,
		Meters: ledger.NewMeters(e.Config.Meters), OnClose: stripe.NewSync(e.Config).OnClose(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Invoices) != 1 {
		t.Fatalf("%d invoices, want 1", len(res.Invoices))
	}
	await.Eventually(t, 10*time.Second, "the line's push delivered", func() bool { return rowsPushed(e, "delivered") == 1 })
	events := fake.Snapshot()
	if len(events) != 1 {
		t.Fatalf("Stripe holds %d events, want 1", len(events))
	}
	for _, ev := range events {
		if ev.Value != "2" || ev.Customer != "cus_1" || ev.Timestamp != p.End.Unix()-1 {
			t.Errorf("pushed %+v, want value 2 for cus_1 at the period's last second", ev)
		}
	}
}

// In close mode, a meter priced by model is invoiced on a line per model,
// and each line is pushed under its own identifier: gpt-4o's 1.0 pushes 1,
// o1-mini's 0.5 brings the period's running total to 1.5, which pushes 1
// more, so Stripe holds the ledger's 1.5 rounded once (2). Pending
// together, the two pushes reach Stripe as one meter event of 2, under an
// identifier of its own.
func TestStripeCloseModePushesEachModelsLine(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeClose, "1", func(c *config.Config) {
		c.Usage[0].Properties = map[string]ledger.Field{"model": {Path: "data.model"}}
	})
	for i, model := range []string{"gpt-4o", "gpt-4o", "o1-mini"} {
		body := fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":0.5,"occurred_at":"2026-11-29T10:00:00Z","model":%q}}`, model)
		if r := e.Send(fmt.Sprintf("evt_%d", i), body); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	two, one := pricing.MustDecimal("2"), pricing.MustDecimal("1")
	plan := pricing.Plan{Name: "ai", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{{Meter: "api_requests", By: "model",
		Rates:   map[string]*pricing.Price{"gpt-4o": {Model: pricing.Unit, Unit: &two}},
		Default: &pricing.Price{Model: pricing.Unit, Unit: &one}}}}
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.NewCatalog([]pricing.Plan{plan})
	if err != nil {
		t.Fatal(err)
	}
	p, err := ledger.MonthPeriod("2026-11", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	res, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: p, All: true, Meters: ledger.NewMeters(e.Config.Meters),
		Pricing: &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("ai", nil)}, OnClose: stripe.NewSync(e.Config).OnClose(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Invoices); n != 1 || len(res.Invoices[0].Lines) != 2 {
		t.Fatalf("%d invoices, want 1 with a line per model: %+v", n, res.Invoices)
	}
	await.Eventually(t, 10*time.Second, "both lines' pushes delivered", func() bool { return rowsPushed(e, "delivered") == 2 })
	if got := fake.Totals()[[2]string{"cus_1", "api_requests"}]; got == nil || got.Cmp(big.NewInt(2)) != 0 {
		t.Errorf("Stripe holds %v for cus_1, want 2 (1.5 rounded once)", got)
	}
	if n := e.Int(`SELECT COUNT(DISTINCT identifier) FROM stripe_pushes`); n != 2 || len(fake.Snapshot()) != 1 {
		t.Errorf("%d identifiers and %d events in Stripe, want one per line (2) and one event carrying both", n, len(fake.Snapshot()))
	}
	var sent string
	e.DB.Read.QueryRow(`SELECT identifier FROM stripe_sends WHERE pushes = 2 LIMIT 1`).Scan(&sent)
	if _, ok := fake.Snapshot()[sent]; !ok {
		t.Errorf("Stripe's event is not the stored send %q: %v", sent, fake.Snapshot())
	}
}

// A response lost after Stripe stored the event: the resend under the same
// identifier gets Stripe's duplicate answer, which counts as delivered, and
// Stripe holds the event once.
func TestStripeDuplicateAfterLostReplyIsDelivered(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	fake.Fail = func(n int) fakestripe.Failure {
		if n == 1 {
			return fakestripe.LostReply
		}
		return fakestripe.None
	}
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeStream, "1")
	if r := e.Send("evt_lost", testenv.UsageBody("cus_1", "api_requests", "3")); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	await.Eventually(t, 10*time.Second, "the push delivered", func() bool { return rowsPushed(e, "delivered") == 1 })
	fake.Mu.Lock()
	calls, dups := fake.Calls, fake.Duplicates
	fake.Mu.Unlock()
	if calls != 2 || dups != 1 || len(fake.Snapshot()) != 1 {
		t.Errorf("%d calls, %d duplicate answers, %d events; want 2, 1, 1", calls, dups, len(fake.Snapshot()))
	}
	if n := e.Int(`SELECT COUNT(*) FROM outbox_attempts WHERE status_code = 400 AND error = ''`); n != 1 {
		t.Errorf("%d attempts recorded as the duplicate answer (400, no error), want 1", n)
	}
}

// Usage older than Stripe's 35 days is not dead for its age: it is sent
// stamped when it is sent (carried), counts in Stripe's current period,
// and stripe status shows it carried out of its own month and agreeing.
func TestStripeOldTimestampIsCarried(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeStream, "1")
	at := time.Now().Add(-40 * 24 * time.Hour).UTC()
	body := fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":3,"occurred_at":%q}}`, at.Format(time.RFC3339))
	before := time.Now().Unix()
	if r := e.Send("evt_old", body); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	await.Eventually(t, 10*time.Second, "the push delivered", func() bool { return rowsPushed(e, "delivered") == 1 })
	events := fake.Snapshot()
	if len(events) != 1 {
		t.Fatalf("Stripe holds %d events, want 1", len(events))
	}
	for _, ev := range events {
		if ev.Value != "3" || ev.Timestamp < before || ev.Timestamp > time.Now().Unix() {
			t.Errorf("Stripe holds %+v, want 3 stamped when sent (at or after %d)", ev, before)
		}
	}
	if n := e.Int(`SELECT COUNT(*) FROM stripe_sends WHERE carried = 1 AND timestamp >= ?`, before); n != 1 {
		t.Errorf("%d sends stored as carried, want 1", n)
	}
	p, err := ledger.MonthPeriod(at.Format("2006-01"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := stripe.Status(context.Background(), e.DB, e.Config.Meters, p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].Ledger != "3" || lines[0].Pushed != "3" || lines[0].Acknowledged != "3" || lines[0].Carried != "3" ||
		lines[0].State != stripe.StateAgrees {
		t.Errorf("status of %s: %+v, want ledger, pushed, acked and carried 3, agreeing", p.Label, lines)
	}
	now, err := ledger.MonthPeriod(time.Now().UTC().Format("2006-01"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if lines, err = stripe.Status(context.Background(), e.DB, e.Config.Meters, now, "", nil); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].CarriedIn != "3" || lines[0].Ledger != "0" || lines[0].State != stripe.StateAgrees {
		t.Errorf("status of %s: %+v, want 3 carried in, agreeing", now.Label, lines)
	}
}

// 429 (with Retry-After) and 5xx are retried with backoff until Stripe
// takes the event; a wrong key fails every attempt and never shows the key
// in an error, an attempt or the log.
func TestStripeRetriesAndNeverShowsTheKey(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	fake.Fail = func(n int) fakestripe.Failure {
		switch n {
		case 1:
			return fakestripe.Throttle
		case 2:
			return fakestripe.Down
		}
		return fakestripe.None
	}
	e, _, log := stripeEnv(t, fake.URL, ledger.StripeStream, "1000")
	if r := e.Send("evt_r", testenv.UsageBody("cus_1", "api_requests", "0.0125")); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	await.Eventually(t, 15*time.Second, "the push delivered", func() bool { return rowsPushed(e, "delivered") == 1 })
	if fake.Refused[429] != 1 || fake.Refused[503] != 1 {
		t.Errorf("refused %v, want one 429 and one 503", fake.Refused)
	}
	if got := fake.Totals()[[2]string{"cus_1", "api_requests"}]; got == nil || got.Int64() != 12 {
		t.Errorf("Stripe holds %v, want 12 (0.0125 × 1000 rounded half to even)", got)
	}

	// A key Stripe does not take: attempts fail, and nothing shows the key.
	wrong := fakestripe.Serve(t, "sk_test_other")
	e2, _, log2 := stripeEnv(t, wrong.URL, ledger.StripeStream, "1")
	if r := e2.Send("evt_k", testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	await.Eventually(t, 10*time.Second, "two failed attempts", func() bool {
		return e2.Int(`SELECT COUNT(*) FROM outbox_attempts WHERE status_code = 401`) >= 2
	})
	var texts []string
	rows, err := e2.DB.Read.Query(`SELECT error || CAST(response AS TEXT) FROM outbox_attempts UNION ALL SELECT last_error FROM outbox
		UNION ALL SELECT last_error FROM forward_destinations`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		texts = append(texts, s)
	}
	rows.Close()
	texts = append(texts, log.String(), log2.String())
	for _, s := range texts {
		if strings.Contains(s, stripeKey) || strings.Contains(s, stripeKey[8:]) {
			t.Errorf("the API key shows in %q", s)
		}
	}
	if !strings.Contains(strings.Join(texts, "\n"), "HTTP 401") {
		t.Error("the failed attempts do not say HTTP 401")
	}
}

// syncBuffer is a log sink safe for the relay's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
