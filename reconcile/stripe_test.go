package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// stripeFixture loads 250 events created over the last 2 hours into the fake
// API and delivers all but 17 of them by webhook. It returns the missing ids
// and the expected ledger total of all 250.
func stripeFixture(t *testing.T, e *env) (missing []string, total ledger.Quantity) {
	t.Helper()
	skip := map[int]bool{}
	for i := 3; len(skip) < 17; i += 14 { // spread over all three pages
		skip[i] = true
	}
	for i := 0; i < 250; i++ {
		body := stripeEventJSON(i, testNow.Add(-2*time.Hour).Add(time.Duration(i)*20*time.Second))
		e.stripe.add(body)
		total += ledger.Quantity(i%7+1) * ledger.Scale
		if skip[i] {
			missing = append(missing, fmt.Sprintf("evt_%03d", i))
			continue
		}
		if code, r := e.post("stripe", "", "", body); code != 200 || r["duplicate"] != false {
			t.Fatalf("webhook %d: %d %v", i, code, r)
		}
	}
	sort.Strings(missing)
	return missing, total
}

func (e *env) reconcileIDs(provider string) []string {
	var ids []string
	if err := e.DB.Read.Select(&ids, `SELECT event_id FROM receipts WHERE provider = ? AND source = 'reconcile' ORDER BY event_id`, provider); err != nil {
		e.T.Fatal(err)
	}
	return ids
}

// checkReconciled asserts the ledger total and that exactly the missing ids
// were inserted with source 'reconcile'.
func (e *env) checkReconciled(provider string, missing []string, total ledger.Quantity) {
	e.T.Helper()
	if got := e.usageSum(provider); got != total {
		e.T.Errorf("ledger total %s, want %s", got, total)
	}
	if got := e.reconcileIDs(provider); strings.Join(got, ",") != strings.Join(missing, ",") {
		e.T.Errorf("reconciled ids\n got %v\nwant %v", got, missing)
	}
}

func TestStripeReconcileInsertsExactlyTheMissingEvents(t *testing.T) {
	e := newEnv(t, envOptions{})
	missing, total := stripeFixture(t, e)
	if got := e.usageSum("stripe"); got == total {
		t.Fatalf("fixture: webhooks alone already give the full total %s", got)
	}
	r := e.reconciler("stripe")
	rep, err := r.Run(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pages != 3 || rep.Seen != 250 || rep.AlreadyPresent != 233 || rep.Inserted != 17 || rep.Failed != 0 || !rep.Complete {
		t.Fatalf("report %+v", rep)
	}
	if got := e.reconcileIDs("stripe"); strings.Join(got, ",") != strings.Join(missing, ",") {
		t.Errorf("reconciled ids\n got %v\nwant %v", got, missing)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE provider = 'stripe'`); n != 250 {
		t.Errorf("receipts = %d, want 250", n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM metered_usage WHERE provider = 'stripe'`); n != 250 {
		t.Errorf("usage rows = %d, want 250", n)
	}
	if got := e.usageSum("stripe"); got != total {
		t.Errorf("ledger total %s, want %s", got, total)
	}
	// The inserted receipts went through the apply path: status, attempt, stored body.
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE source = 'reconcile' AND status = 'applied' AND handler_version = 'test'
		AND received_at = ? AND body IS NOT NULL`, testNow.UnixMilli()); n != 17 {
		t.Errorf("applied reconcile receipts = %d", n)
	}
	if n := e.CountAttempts(func(a schema.Attempt) bool {
		return a.RemoteAddr == "reconcile:stripe-api" && a.Outcome == "inserted" && strings.HasPrefix(a.RequestID, "req_")
	}); n != 17 {
		t.Errorf("reconcile attempts = %d, want 17", n)
	}
	// The stored body is the event JSON from the API, byte for byte.
	var body []byte
	if err := e.DB.Read.Get(&body, `SELECT body FROM receipts WHERE event_id = ?`, missing[0]); err != nil {
		t.Fatal(err)
	}
	var i int
	fmt.Sscanf(missing[0], "evt_%03d", &i)
	if want := stripeEventJSON(i, testNow.Add(-2*time.Hour).Add(time.Duration(i)*20*time.Second)); string(body) != string(want) {
		t.Errorf("stored body %s\nwant %s", body, want)
	}
	cp := e.checkpoint("stripe")
	if cp.Cursor != "" || cp.CompletedThrough != rep.WindowTo.UnixMilli() || rep.WindowTo != testNow.Add(-r.Settle) {
		t.Errorf("checkpoint %+v after a complete run ending %v", cp, rep.WindowTo)
	}
	// The API was asked for the window with Bearer auth and the documented params.
	if l := e.stripe.log(); len(l) != 3 || l[0].StartingAfter != "" || l[1].StartingAfter != "evt_150" || l[2].StartingAfter != "evt_050" {
		t.Errorf("requests %+v", l)
	}

	// Second run over the same 72 h: nothing new.
	rep2, err := r.Run(context.Background(), Options{Since: 72 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Seen != 250 || rep2.AlreadyPresent != 250 || rep2.Inserted != 0 || rep2.Failed != 0 {
		t.Errorf("second run %+v", rep2)
	}
	if n := e.Int(`SELECT COUNT(*) FROM metered_usage`); n != 250 {
		t.Errorf("usage rows after second run = %d", n)
	}
	if n := e.Attempts(); n != 250 {
		t.Errorf("attempts after second run = %d: present events must not add attempts", n)
	}

	// A run without --since continues from the checkpoint, minus the overlap.
	e.Clock.Set(testNow.Add(time.Hour))
	rep3, err := r.Run(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := time.UnixMilli(rep2.WindowTo.UnixMilli()).Add(-r.Overlap).UTC(); !rep3.WindowFrom.Equal(want) {
		t.Errorf("third window from %v, want %v (checkpoint minus overlap)", rep3.WindowFrom, want)
	}
	if rep3.Inserted != 0 || rep3.Seen >= 250 {
		t.Errorf("third run %+v", rep3)
	}
}

func TestStripeReconcileDryRunWritesNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	stripeFixture(t, e)
	before := e.Rows()
	rep, err := e.reconciler("stripe").Run(context.Background(), Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Inserted != 17 || rep.AlreadyPresent != 233 || !rep.DryRun {
		t.Errorf("dry run %+v", rep)
	}
	after := e.Rows()
	if before != after || e.Int(`SELECT COUNT(*) FROM reconcile_checkpoints`) != 0 {
		t.Errorf("dry run wrote: %v -> %v", before, after)
	}
}

func TestStripe500OnPage2KeepsCheckpointAfterPage1(t *testing.T) {
	e := newEnv(t, envOptions{})
	missing, total := stripeFixture(t, e)
	down := true
	e.stripe.fail = func(page, attempt int) (int, string) {
		if page == 2 && down {
			return 500, ""
		}
		return 0, ""
	}
	r := e.reconciler("stripe")
	rep, err := r.Run(context.Background(), Options{})
	if !errors.Is(err, ErrIncomplete) || rep.Complete || rep.Pages != 1 || rep.Failed != 1 {
		t.Fatalf("run with page 2 down: err %v report %+v", err, rep)
	}
	if !strings.Contains(err.Error(), "500") {
		t.Errorf("error does not say what failed: %v", err)
	}
	// Retries are bounded: MaxTries requests for page 2, then the run stops.
	var page2 int
	for _, rq := range e.stripe.log() {
		if rq.Page == 2 {
			page2++
		}
	}
	if page2 != 3 {
		t.Errorf("page 2 was requested %d times, want 3 (MaxTries)", page2)
	}
	// Page 1's missing events are in; the checkpoint sits after page 1.
	inPage1 := 0
	for _, id := range missing {
		if id >= "evt_150" {
			inPage1++
		}
	}
	if rep.Inserted != inPage1 || len(e.reconcileIDs("stripe")) != inPage1 {
		t.Errorf("inserted %d (stored %d), want page 1's %d", rep.Inserted, len(e.reconcileIDs("stripe")), inPage1)
	}
	cp := e.checkpoint("stripe")
	if cp.Cursor != "evt_150" || cp.Pages != 1 || cp.CompletedThrough != 0 || cp.WindowEnd != rep.WindowTo.UnixMilli() {
		t.Fatalf("checkpoint after failure %+v", cp)
	}

	// The API recovers; later, the next run resumes at page 2 of the same window.
	down = false
	e.Clock.Set(testNow.Add(10 * time.Minute))
	n := len(e.stripe.log())
	rep2, err := r.Run(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep2.Resumed || !rep2.Complete || rep2.Pages != 2 || rep2.Inserted != 17-inPage1 || !rep2.WindowTo.Equal(rep.WindowTo) {
		t.Errorf("resumed run %+v", rep2)
	}
	if first := e.stripe.log()[n]; first.StartingAfter != "evt_150" {
		t.Errorf("resumed run started after %q, want evt_150", first.StartingAfter)
	}
	if got := e.reconcileIDs("stripe"); len(got) != 17 {
		t.Errorf("reconciled %d events in all, want 17", len(got))
	}
	if got := e.usageSum("stripe"); got != total {
		t.Errorf("ledger total %s, want %s", got, total)
	}
	if cp := e.checkpoint("stripe"); cp.Cursor != "" || cp.CompletedThrough != rep.WindowTo.UnixMilli() {
		t.Errorf("checkpoint after recovery %+v", cp)
	}
}

func TestStripeTransient5xxIsRetried(t *testing.T) {
	e := newEnv(t, envOptions{})
	missing, total := stripeFixture(t, e)
	e.stripe.fail = func(page, attempt int) (int, string) {
		if page == 2 && attempt == 1 {
			return 503, ""
		}
		return 0, ""
	}
	rep, err := e.reconciler("stripe").Run(context.Background(), Options{})
	if err != nil || rep.Inserted != 17 || !rep.Complete {
		t.Fatalf("err %v report %+v", err, rep)
	}
	e.checkReconciled("stripe", missing, total)
}

func TestStripe429RetryAfterIsHonored(t *testing.T) {
	e := newEnv(t, envOptions{})
	missing, total := stripeFixture(t, e)
	e.stripe.fail = func(page, attempt int) (int, string) {
		if page == 1 && attempt == 1 {
			return 429, "1"
		}
		return 0, ""
	}
	rep, err := e.reconciler("stripe").Run(context.Background(), Options{})
	if err != nil || rep.Inserted != 17 {
		t.Fatalf("err %v report %+v", err, rep)
	}
	e.checkReconciled("stripe", missing, total)
	l := e.stripe.log()
	if l[0].Code != 429 || l[1].Code != 200 || l[1].Page != 1 {
		t.Fatalf("requests %+v", l)
	}
	// The retry waited as told (backoff alone would retry within 5 ms here).
	if gap := l[1].At.Sub(l[0].At); gap < time.Second {
		t.Errorf("retried after %v, Retry-After said 1s", gap)
	}
}

func TestStripeErrorsThatEndARun(t *testing.T) {
	t.Run("Retry-After longer than MaxRetryAfter", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		stripeFixture(t, e)
		e.stripe.fail = func(page, attempt int) (int, string) { return 429, "3600" }
		start := time.Now()
		rep, err := e.reconciler("stripe").Run(context.Background(), Options{})
		if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "retry after 1h0m0s") || rep.Inserted != 0 {
			t.Fatalf("err %v report %+v", err, rep)
		}
		if time.Since(start) > 2*time.Second || len(e.stripe.log()) != 1 {
			t.Errorf("waited %v over %d requests instead of giving up", time.Since(start), len(e.stripe.log()))
		}
		if e.Int(`SELECT COUNT(*) FROM reconcile_checkpoints`) != 0 {
			t.Errorf("a failed first page stored a checkpoint")
		}
	})
	t.Run("wrong API key is not retried and never logged", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		stripeFixture(t, e)
		r := e.reconciler("stripe")
		r.Source.(*StripeSource).Client.Token = "sk_test_wrong"
		_, err := r.Run(context.Background(), Options{})
		if err == nil || !strings.Contains(err.Error(), "401") || strings.Contains(err.Error(), "sk_test_wrong") {
			t.Fatalf("err %v", err)
		}
		if n := e.stripe.unauthorized; n != 1 {
			t.Errorf("%d requests with the wrong key, want 1 (a 401 is final)", n)
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE source = 'reconcile'`); n != 0 {
			t.Errorf("reconcile receipts = %d after a 401, want 0", n)
		}
		if n := e.Int(`SELECT COUNT(*) FROM reconcile_checkpoints`); n != 0 {
			t.Errorf("checkpoints = %d after a 401, want 0", n)
		}
	})
	t.Run("storage failure does not advance the checkpoint", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		stripeFixture(t, e)
		e.Writer.Close() // every Submit now fails with ErrClosed
		rep, err := e.reconciler("stripe").Run(context.Background(), Options{})
		if !errors.Is(err, ErrIncomplete) || rep.Failed == 0 || rep.Inserted != 0 {
			t.Fatalf("err %v report %+v", err, rep)
		}
		if !strings.Contains(err.Error(), custody.ErrClosed.Error()) {
			t.Errorf("error %v", err)
		}
		if e.Int(`SELECT COUNT(*) FROM reconcile_checkpoints`) != 0 {
			t.Errorf("checkpoint stored despite failures")
		}
	})
	t.Run("a mapping failure is inserted as failed, not lost", func(t *testing.T) {
		e := newEnv(t, envOptions{quantityPath: "data.object.amount"})
		for i := 0; i < 5; i++ {
			e.stripe.add(stripeEventJSON(i, testNow.Add(-time.Hour)))
		}
		rep, err := e.reconciler("stripe").Run(context.Background(), Options{})
		if err != nil || rep.Inserted != 5 || rep.MappingFailed != 5 {
			t.Fatalf("err %v report %+v", err, rep)
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE status = 'failed' AND error LIKE 'quantity:%'`); n != 5 {
			t.Errorf("failed receipts = %d", n)
		}
	})
}
