package forward_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/stripe"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

// clockedStripe is a stream-mode ledger on a test clock (from the day after
// testenv.UsageBody's usage), pushing to a fake Stripe on the same clock,
// with a relay that startRelay starts (and stops before starting another).
type clockedStripe struct {
	e     *testenv.Env
	fake  *fakestripe.Stripe
	relay *forward.Relay
}

func newClockedStripe(t *testing.T) *clockedStripe {
	t.Helper()
	fake := fakestripe.Serve(t, stripeKey)
	e := testenv.New(t, testenv.Options{Now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
		Edits: []func(*config.Config){stripeConfig(fake.URL, ledger.StripeStream, "1")}})
	fake.Mu.Lock()
	fake.Now = e.Clock.Now
	fake.Mu.Unlock()
	return &clockedStripe{e: e, fake: fake}
}

func (c *clockedStripe) startRelay(t *testing.T) {
	t.Helper()
	if c.relay != nil {
		c.relay.Close()
	}
	c.relay = &forward.Relay{DB: c.e.DB, Writer: c.e.Writer, Stripe: c.e.Config.Stripe, Pushes: c.e.DB, Poll: 50 * time.Millisecond, Sole: true,
		Now: c.e.Clock.Now, Log: slog.New(slog.NewTextHandler(&syncBuffer{}, nil))}
	if err := c.relay.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.relay.Close)
}

func (c *clockedStripe) void(t *testing.T, eventID string) {
	t.Helper()
	op := &custody.VoidEvent{Void: ledger.Void{Provider: "default", EventID: eventID, Reason: "sent twice", Actor: "test"},
		Meters: ledger.NewMeters(c.e.Config.Meters)}
	if err := c.e.Writer.Submit(context.Background(), op); err != nil {
		t.Fatal(err)
	}
}

func (c *clockedStripe) total(customer string) string {
	if v := c.fake.Totals()[[2]string{customer, "api_requests"}]; v != nil {
		return v.String()
	}
	return "0"
}

// usage sends quantities for cus_1 as evt_0, evt_1, …, one after another,
// each once the push before was delivered, so each push is a meter event
// of its own (one a void can cancel): Stripe then holds want.
func (c *clockedStripe) usage(t *testing.T, want string, quantities ...string) {
	t.Helper()
	for i, q := range quantities {
		if r := c.e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", q)); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
		await.Eventually(t, 10*time.Second, "the usage's push delivered", func() bool { return rowsPushed(c.e, "delivered") == i+1 })
	}
	if got := c.total("cus_1"); got != want {
		t.Fatalf("Stripe holds %s, want %s", got, want)
	}
}

// A void of an event whose push Stripe took less than 24 hours ago cancels
// that meter event (a meter event adjustment) instead of sending a
// negative value; the remainder the voided push carried is pushed with it,
// so Stripe's sum stays the ledger's total rounded once.
func TestStripeVoidWithin24HoursCancels(t *testing.T) {
	c := newClockedStripe(t)
	c.startRelay(t)
	// 0.6 pushes 1, the next 0.6 pushes 0 (1.2 rounds to 1).
	c.usage(t, "1", "0.6", "0.6")
	c.e.Clock.Add(23 * time.Hour)
	// Voiding the first takes its 1 back; the ledger's 0.6 rounds to 1:
	// the cancel goes with a push of the remainder, 1.
	c.void(t, "evt_0")
	await.Eventually(t, 10*time.Second, "the void's pushes delivered", func() bool { return rowsPushed(c.e, "delivered") == 4 })
	var cancels string
	c.e.DB.Read.QueryRow(`SELECT cancels FROM stripe_pushes WHERE source = 'adjustment' AND cancels != ''`).Scan(&cancels)
	var voided string
	c.e.DB.Read.QueryRow(`SELECT identifier FROM stripe_pushes p JOIN metered_usage u ON u.id = p.ledger_id WHERE u.event_id = 'evt_0'`).Scan(&voided)
	if cancels == "" || cancels != voided {
		t.Fatalf("the void's push cancels %q, want the voided push %q", cancels, voided)
	}
	c.fake.Mu.Lock()
	n, canceled := c.fake.Cancels, c.fake.Events[voided].Canceled
	c.fake.Mu.Unlock()
	if n != 1 || !canceled {
		t.Errorf("Stripe took %d cancels (evt_0's event canceled: %v), want 1", n, canceled)
	}
	for _, ev := range c.fake.Snapshot() {
		if v, _ := new(big.Int).SetString(ev.Value, 10); v.Sign() < 0 {
			t.Errorf("a negative meter event %+v, want the cancel only", ev)
		}
	}
	if n := c.e.Int(`SELECT COUNT(*) FROM stripe_pushes WHERE source = 'adjustment' AND cancels = '' AND value = '1'`); n != 1 {
		t.Errorf("%d pushes of the remainder, want 1", n)
	}
	if got := c.total("cus_1"); got != "1" {
		t.Errorf("Stripe holds %s, want 1 (0.6 rounded)", got)
	}
	statusAgrees(t, c.e, "1")
}

// Past Stripe's 24 hours the void is the compensating value, a negative
// meter event: Stripe can no longer cancel.
func TestStripeVoidAfter24HoursCompensates(t *testing.T) {
	c := newClockedStripe(t)
	c.startRelay(t)
	c.usage(t, "3", "1", "2")
	c.e.Clock.Add(25 * time.Hour)
	c.void(t, "evt_1")
	await.Eventually(t, 10*time.Second, "the void's push delivered", func() bool { return rowsPushed(c.e, "delivered") == 3 })
	if n := c.e.Int(`SELECT COUNT(*) FROM stripe_pushes WHERE cancels != ''`); n != 0 {
		t.Errorf("%d cancels, want none after 24 hours", n)
	}
	c.fake.Mu.Lock()
	n := c.fake.Cancels
	c.fake.Mu.Unlock()
	if n != 0 {
		t.Errorf("Stripe took %d cancels, want none", n)
	}
	var negative bool
	for _, ev := range c.fake.Snapshot() {
		negative = negative || ev.Value == "-2"
	}
	if !negative {
		t.Errorf("Stripe holds %+v, want a meter event of -2", c.fake.Snapshot())
	}
	if got := c.total("cus_1"); got != "1" {
		t.Errorf("Stripe holds %s, want 1 (1, 2 and the compensating -2)", got)
	}
	statusAgrees(t, c.e, "1")
}

// A cancel written within the 24 hours but sent after them (the relay was
// down): Stripe refuses it, and the relay sends the compensating value
// under the push's identifier instead.
func TestStripeCancelRefusedIsSentAsTheCompensatingValue(t *testing.T) {
	c := newClockedStripe(t)
	c.startRelay(t)
	c.usage(t, "3", "1", "2")
	c.relay.Close()
	c.relay = nil
	c.void(t, "evt_1")
	if n := c.e.Int(`SELECT COUNT(*) FROM stripe_pushes WHERE cancels != ''`); n != 1 {
		t.Fatalf("%d cancels written, want 1", n)
	}
	c.e.Clock.Add(25 * time.Hour)
	c.startRelay(t)
	await.Eventually(t, 10*time.Second, "the void's pushes delivered", func() bool { return rowsPushed(c.e, "pending") == 0 })
	if n := rowsPushed(c.e, "dead"); n != 0 {
		t.Errorf("%d dead pushes, want none", n)
	}
	c.fake.Mu.Lock()
	n, refused := c.fake.Cancels, c.fake.Refused[400]
	c.fake.Mu.Unlock()
	if n != 0 || refused != 1 {
		t.Errorf("Stripe took %d cancels and refused %d calls, want 0 and 1 (the cancel)", n, refused)
	}
	if got := c.total("cus_1"); got != "1" {
		t.Errorf("Stripe holds %s, want 1", got)
	}
	statusAgrees(t, c.e, "1")
}

// A cancel Stripe took whose answer was lost is sent again under the same
// idempotency key; Stripe replays its first answer, and the push is
// delivered: the event is canceled once, and nothing negative is sent.
func TestStripeCancelWhoseReplyWasLostIsDeliveredOnce(t *testing.T) {
	c := newClockedStripe(t)
	c.startRelay(t)
	c.usage(t, "3", "1", "2")
	c.fake.Mu.Lock()
	lost := c.fake.Calls + 1 // the cancel
	c.fake.Fail = func(n int) fakestripe.Failure {
		if n == lost {
			return fakestripe.LostReply
		}
		return fakestripe.None
	}
	c.fake.Mu.Unlock()
	c.e.Clock.Add(time.Hour)
	c.void(t, "evt_1")
	await.Eventually(t, 10*time.Second, "the cancel sent", func() bool {
		c.fake.Mu.Lock()
		defer c.fake.Mu.Unlock()
		return c.fake.Calls >= lost
	})
	// The retry is due after the destination's backoff on the relay's clock.
	await.Eventually(t, 10*time.Second, "the void's push delivered", func() bool {
		c.e.Clock.Add(10 * time.Second)
		return rowsPushed(c.e, "delivered") == 3
	})
	c.fake.Mu.Lock()
	n, calls, refused := c.fake.Cancels, c.fake.Calls, c.fake.Refused[500]
	c.fake.Mu.Unlock()
	if n != 1 || calls != lost+1 || refused != 1 {
		t.Errorf("Stripe took %d cancels in %d calls (%d answered 500), want 1 cancel, the lost call and its replay, one 500", n, calls-lost+1, refused)
	}
	for _, ev := range c.fake.Snapshot() {
		if v, _ := new(big.Int).SetString(ev.Value, 10); v.Sign() < 0 {
			t.Errorf("a negative meter event %+v, want the cancel only", ev)
		}
	}
	if got := c.total("cus_1"); got != "1" {
		t.Errorf("Stripe holds %s, want 1 (evt_1's 2 canceled)", got)
	}
	statusAgrees(t, c.e, "1")
}

func statusAgrees(t *testing.T, e *testenv.Env, want string) {
	t.Helper()
	period, err := ledger.MonthPeriod("2026-11", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := stripe.Status(context.Background(), e.DB, e.Config.Meters, period, "", nil)
	if err != nil || len(lines) != 1 || lines[0].State != stripe.StateAgrees || lines[0].Acknowledged != want || lines[0].Ledger != want {
		t.Errorf("status: %+v, %v; want it to agree at %s", lines, err, want)
	}
}

// A credit to a month past Stripe's 35 days (the adjust on the 6th
// of December of October's usage): its push is carried, sent stamped when
// it is sent and counted in Stripe's December, never dead for its age;
// stripe status shows October agreeing with the credit carried out, and
// December with it carried in.
func TestStripeCreditToAClosedMonthIsCarried(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e := testenv.New(t, testenv.Options{Now: time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC),
		Edits: []func(*config.Config){stripeConfig(fake.URL, ledger.StripeStream, "1")}})
	fake.Mu.Lock()
	fake.Now = e.Clock.Now
	fake.Mu.Unlock()
	c := &clockedStripe{e: e, fake: fake}
	c.startRelay(t)
	body := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":40000,"occurred_at":"2026-10-15T10:00:00Z"}}`)
	if r := e.Send("evt_oct", body); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	await.Eventually(t, 10*time.Second, "October's push delivered", func() bool { return rowsPushed(e, "delivered") == 1 })

	e.Clock.Set(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	a := ledger.Adjustment{Customer: "cus_1", Meter: "api_requests", Quantity: mustRowQuantity(t, "-20000"),
		Reason: "half of October was a load test", OccurredAt: time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)}
	appendAdjustment(t, e.Writer, a)
	await.Eventually(t, 10*time.Second, "the credit's push delivered", func() bool { return rowsPushed(e, "delivered") == 2 })
	if n := rowsPushed(e, "dead"); n != 0 {
		t.Errorf("%d dead pushes, want none", n)
	}
	if got := c.total("cus_1"); got != "20000" {
		t.Errorf("Stripe holds %s, want 20000", got)
	}
	var credit fakestripe.Event
	for _, ev := range fake.Snapshot() {
		if ev.Value == "-20000" {
			credit = ev
		}
	}
	if want := e.Clock.Now().Unix(); credit.Timestamp < want-60 || credit.Timestamp > want {
		t.Errorf("the credit reached Stripe as %+v, want it stamped now (%d)", credit, want)
	}
	oct, _ := ledger.MonthPeriod("2026-10", time.UTC)
	lines, err := stripe.Status(context.Background(), e.DB, e.Config.Meters, oct, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].Ledger != "20000" || lines[0].Pushed != "20000" || lines[0].Acknowledged != "20000" ||
		lines[0].Carried != "-20000" || lines[0].State != stripe.StateAgrees {
		t.Errorf("October: %+v, want ledger, pushed and acked 20000, -20000 carried, agreeing", lines)
	}
	dec, _ := ledger.MonthPeriod("2026-12", time.UTC)
	if lines, err = stripe.Status(context.Background(), e.DB, e.Config.Meters, dec, "", nil); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].CarriedIn != "-20000" || lines[0].State != stripe.StateAgrees {
		t.Errorf("December: %+v, want -20000 carried in, agreeing", lines)
	}
}

// A void within Stripe's 24 hours of a push that reached Stripe in a sum
// with others is not a cancel (that would take the whole sum back): it is
// the compensating value, and Stripe is not asked to cancel.
func TestStripeVoidOfASummedPushIsTheCompensatingValue(t *testing.T) {
	c := sumOfTwo(t)
	c.void(t, "evt_1")
	await.Eventually(t, 10*time.Second, "the void's push delivered", func() bool { return rowsPushed(c.e, "delivered") >= 4 && rowsPushed(c.e, "pending") == 0 })
	c.fake.Mu.Lock()
	cancels, refused := c.fake.Cancels, c.fake.Refused[400]
	c.fake.Mu.Unlock()
	if cancels != 0 || refused != 0 {
		t.Errorf("Stripe took %d cancels and refused %d calls, want neither", cancels, refused)
	}
	if got := c.total("cus_1"); got != "4" {
		t.Errorf("Stripe holds %s, want 4 (1 + 3)", got)
	}
}

// sumOfTwo sends 1, 2 and 3 for cus_1, evt_0 to evt_2, so that evt_1's push
// and evt_2's reach Stripe in one meter event: evt_1's push was claimed by
// a relay that stopped before it planned its sends (its claim released),
// which closed it, and evt_2's push is written before the next claim, which
// takes both.
func sumOfTwo(t *testing.T) *clockedStripe {
	t.Helper()
	c := newClockedStripe(t)
	c.startRelay(t)
	send := func(i int, q string) {
		t.Helper()
		if r := c.e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", q)); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	send(0, "1")
	await.Eventually(t, 10*time.Second, "evt_0's push delivered", func() bool { return rowsPushed(c.e, "delivered") == 1 })
	c.relay.Close()
	send(1, "2")
	// A relay claims evt_1's push, then stops before planning its sends:
	// the claim closed the push, and its release makes it due again.
	now := c.e.Clock.Now().UnixMilli()
	if err := c.e.Writer.Submit(context.Background(), custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		claims, err := tx.Outbox().ClaimOutbox(ctx, "stripe", now, now+60_000, 10)
		if err != nil || len(claims) != 1 {
			return fmt.Errorf("claimed %d messages (%v), want evt_1's push", len(claims), err)
		}
		return tx.Outbox().ReleaseOutbox(ctx, []int64{claims[0].ID}, now)
	})); err != nil {
		t.Fatal(err)
	}
	send(2, "3")
	c.startRelay(t)
	await.Eventually(t, 10*time.Second, "the pushes delivered", func() bool { return rowsPushed(c.e, "delivered") == 3 })
	if n := c.e.Int(`SELECT COUNT(*) FROM stripe_sends WHERE pushes = 2`); n != 2 {
		t.Fatalf("%d pushes sent in a sum of two, want evt_1's and evt_2's", n)
	}
	return c
}

// appendAdjustment appends a's row through w.
func appendAdjustment(t *testing.T, w *custody.Writer, a ledger.Adjustment) {
	t.Helper()
	if err := w.Submit(t.Context(), custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		r, err := a.Row(ctx, tx.Refs(), tx.Now())
		if err != nil {
			return err
		}
		return tx.Append(ctx, r)
	})); err != nil {
		t.Fatal(err)
	}
}

func mustRowQuantity(t *testing.T, s string) ledger.Total {
	t.Helper()
	q, err := ledger.ParseRowQuantity(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// A push retried apart from the rest of its sum (its sum reached Stripe,
// its own message was left dead): it is settled as delivered without a
// request, since Stripe, past its 24 hours of identifiers, would count the
// whole sum again.
func TestStripeRetryOfPartOfASumSendsNothing(t *testing.T) {
	c := sumOfTwo(t)
	var sum string
	if err := c.e.DB.Read.QueryRow(`SELECT identifier FROM stripe_sends WHERE pushes = 2 LIMIT 1`).Scan(&sum); err != nil {
		t.Fatalf("no sum of two: %v", err)
	}
	// One push of the sum is made due again, as a retry of it alone is.
	c.e.DB.Write.MustExec(`UPDATE outbox SET status = 'pending', next_attempt_at = 0, delivered_at = NULL
		WHERE push_id = (SELECT MAX(push_id) FROM stripe_sends WHERE identifier = ?)`, sum)
	c.relay.Kick()
	await.Eventually(t, 10*time.Second, "the retried push settled", func() bool { return rowsPushed(c.e, "delivered") == 3 })
	c.fake.Mu.Lock()
	calls := 0
	for _, id := range c.fake.Seen {
		if id == sum {
			calls++
		}
	}
	c.fake.Mu.Unlock()
	if calls != 1 || c.total("cus_1") != "6" {
		t.Errorf("the sum was sent %d times and Stripe holds %s, want once and 6", calls, c.total("cus_1"))
	}
}

// A push from ahead of Stripe's window (an hour in the future) is stamped
// when it is sent, in its own month still: status counts nothing carried
// out of the month, nor into it, so --remote expects Stripe to hold the
// ledger's total for it.
func TestStripeFuturePushStaysInItsMonth(t *testing.T) {
	c := newClockedStripe(t) // 2026-11-30 12:00 UTC
	c.startRelay(t)
	body := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":5,"occurred_at":"2026-11-30T13:00:00Z"}}`)
	if r := c.e.Send("evt_ahead", body); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	await.Eventually(t, 10*time.Second, "the push delivered", func() bool { return rowsPushed(c.e, "delivered") == 1 })
	if n := c.e.Int(`SELECT COUNT(*) FROM stripe_sends WHERE carried = 1`); n != 1 {
		t.Fatalf("%d carried sends, want the one stamped now", n)
	}
	nov, _ := ledger.MonthPeriod("2026-11", time.UTC)
	lines, err := stripe.Status(context.Background(), c.e.DB, c.e.Config.Meters, nov, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].Ledger != "5" || lines[0].Acknowledged != "5" || lines[0].Carried != "0" || lines[0].CarriedIn != "0" ||
		lines[0].State != stripe.StateAgrees {
		t.Errorf("November: %+v, want 5 acknowledged, nothing carried out or in", lines)
	}
}
