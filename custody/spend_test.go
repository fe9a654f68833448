package custody_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// teamPlan is the plan "team", the default: a 29.00 USD fee, api_requests
// priced graduated (the first 1,000 free, then 0.01 each up to 100,000,
// then 0.005), spend capped at 1000.00 (hard) with alerts at 500.00 and
// 80%, and a destination "sales" for spend alerts. Spend is
// 29 + 0.01 × (q − 1000) for 1,000 ≤ q ≤ 100,000.
func teamPlan(t *testing.T) (func(*config.Config), func(*custody.Writer)) {
	t.Helper()
	limit := pricing.MustDecimal("1000.00")
	fee := pricing.MustDecimal("29.00")
	upTo1, upTo2 := pricing.MustDecimal("1000"), pricing.MustDecimal("100000")
	plans := []pricing.Plan{{Name: "team", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: &fee,
		Prices: []pricing.Price{{Meter: "api_requests", Model: pricing.Graduated, Tiers: []pricing.Tier{
			{UpTo: &upTo1, Unit: pricing.MustDecimal("0")}, {UpTo: &upTo2, Unit: pricing.MustDecimal("0.01")}, {Unit: pricing.MustDecimal("0.005")}}}},
		Spend: &pricing.Spend{Limit: &limit, Alerts: []string{"500.00", "80%"}}}}
	catalog := testenv.Catalog(t, plans)
	edit := func(c *config.Config) {
		c.Plans, c.Catalog, c.Customers.DefaultPlan = plans, catalog, "team"
		c.Destinations = []config.Destination{{Name: "sales", URL: "http://127.0.0.1:1/hooks",
			Events: config.Events{Types: []string{entitle.SpendAlertEventType}}}}
	}
	writer := func(w *custody.Writer) { w.Limits = entitle.NewPolicy(catalog, "team") }
	return edit, writer
}

func newSpendEnv(t *testing.T, backend string) *env {
	t.Helper()
	edit, writer := teamPlan(t)
	e := newEnvWithWriter(t, backend, writer, edit)
	if built, err := e.Writer.BuildUsageState(t.Context(), "UTC"); err != nil || !built {
		t.Fatalf("build usage state: %v %v", built, err)
	}
	return e
}

type spendCrossingRow struct {
	Customer    string `db:"customer_id"`
	PeriodStart int64  `db:"period_start"`
	Threshold   string `db:"threshold"`
	Value       string `db:"threshold_value"`
	Spent       string `db:"spent"`
	Currency    string `db:"currency"`
	RowID       int64  `db:"row_id"`
	ReceiptID   int64  `db:"receipt_id"`
}

func spendCrossings(t *testing.T, e *env) []spendCrossingRow {
	t.Helper()
	var cs []spendCrossingRow
	if err := e.DB.Read.Select(&cs, `SELECT customer_id, period_start, threshold, threshold_value, spent, currency, row_id, receipt_id
		FROM spend_crossings ORDER BY row_id, threshold`); err != nil {
		t.Fatal(err)
	}
	return cs
}

func spendChecker(e *env) *entitle.Checker {
	return &entitle.Checker{DB: e.DB, Policy: entitle.NewPolicy(e.Config.Catalog, "team"), Now: e.Now}
}

func spendNow(t *testing.T, e *env, customer string) entitle.SpendAnswer {
	t.Helper()
	a, err := spendChecker(e).Spend(t.Context(), customer)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func send(t *testing.T, e *env, id string, body []byte) int64 {
	t.Helper()
	if r := e.Send(id, body); r.Code != 200 {
		t.Fatalf("%s: %d %+v", id, r.Code, r.Body)
	}
	return int64(e.Int(`SELECT MAX(id) FROM metered_usage WHERE event_id = ?`, id))
}

// A graduated price takes spend to 500.00 exactly on one row (48,100
// requests: 0.01 × 47,100 = 471.00, plus the 29.00 fee): the threshold
// fires once, with that row, and its alert is a receipt of provider
// hookledger with one outbox message; the rows after it fire nothing.
func TestSpendThresholdFiresOnTheRowThatReachesIt(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newSpendEnv(t, backend)
		send(t, e, "a", testenv.UsageBody("cus_1", "api_requests", "40000")) // 419.00
		if cs := spendCrossings(t, e); len(cs) != 0 {
			t.Fatalf("at 419.00: crossings %+v", cs)
		}
		row := send(t, e, "b", testenv.UsageBody("cus_1", "api_requests", "8100")) // 500.00
		send(t, e, "c", testenv.UsageBody("cus_1", "api_requests", "1"))           // 500.01
		cs := spendCrossings(t, e)
		if len(cs) != 1 || cs[0].Threshold != "500.00" || cs[0].Value != "500.00" || cs[0].Spent != "500.00" ||
			cs[0].Currency != "USD" || cs[0].RowID != row {
			t.Fatalf("crossings = %+v, want 500.00 once, at 500.00, by row %d", cs, row)
		}
		var body []byte
		if err := e.DB.Read.Get(&body, `SELECT body FROM receipts WHERE id = ? AND provider = 'hookledger' AND source = 'alert'
			AND event_type = 'spend.threshold_crossed' AND status = 'ignored'`, cs[0].ReceiptID); err != nil {
			t.Fatalf("alert receipt %d: %v", cs[0].ReceiptID, err)
		}
		var alert entitle.SpendAlert
		if err := json.Unmarshal(body, &alert); err != nil {
			t.Fatal(err)
		}
		if alert.Customer != "cus_1" || alert.Threshold != "500.00" || alert.Amount.String() != "500.00" || alert.Spent.String() != "500.00" ||
			alert.Currency != "USD" || alert.Plan != "team@2026-01-01" || alert.Row.ID != row || alert.Row.EventID != "b" ||
			alert.Limit == nil || alert.Limit.Amount.String() != "1000.00" || alert.Period.Label != "2026-11" {
			t.Errorf("alert = %s", body)
		}
		var eventID string
		if err := e.DB.Read.Get(&eventID, `SELECT event_id FROM receipts WHERE id = ?`, cs[0].ReceiptID); err != nil ||
			eventID != entitle.SpendAlertEventID("cus_1", cs[0].PeriodStart, "500.00") {
			t.Errorf("alert event id %q %v", eventID, err)
		}
		if n := e.Int(`SELECT COUNT(*) FROM outbox o JOIN receipts r ON r.id = o.receipt_id WHERE r.provider = 'hookledger' AND o.destination = 'sales'`); n != 1 {
			t.Errorf("%d outbox messages for spend alerts, want 1", n)
		}
		if a := spendNow(t, e, "cus_1"); a.Spent == nil || a.Spent.String() != "500.01" || !a.Allowed || a.Remaining.String() != "499.99" {
			t.Errorf("spend now = %+v", a)
		}
		checkSpendVerifies(t, e, 1)
	})
}

// 32 senders push one customer across 500.00 and 80% of 1000.00, every
// event sent twice by different senders: each spend threshold fires exactly
// once, with the row that crossed it. Every row is 1,000 requests: after n
// rows spend is 29 + 10 × (n − 1) up to n = 100, so 500.00 is crossed by
// the 49th row (509.00) and 800.00 by the 79th (809.00), whatever order the
// senders' rows got.
func TestSpendThresholdsFireOnceUnderConcurrentSenders(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newSpendEnv(t, backend)
		sendTwiceConcurrently(t, e, 150, "1000")
		cs := spendCrossings(t, e)
		want := []spendCrossingRow{{Threshold: "500.00", Value: "500.00", Spent: "509.00", RowID: nthRow(e, "cus_1", 49)},
			{Threshold: "80%", Value: "800.00", Spent: "809.00", RowID: nthRow(e, "cus_1", 79)}}
		if len(cs) != len(want) {
			t.Fatalf("crossings = %+v, want 500.00 and 80%% once each", cs)
		}
		for i, w := range want {
			if cs[i].Threshold != w.Threshold || cs[i].Value != w.Value || cs[i].Spent != w.Spent || cs[i].RowID != w.RowID {
				t.Errorf("crossing %d = %+v, want %+v", i, cs[i], w)
			}
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE provider = 'hookledger' AND event_type = 'spend.threshold_crossed'`); n != 2 {
			t.Errorf("%d spend alert receipts, want 2", n)
		}
		if n := e.Int(`SELECT COUNT(*) FROM outbox o JOIN receipts r ON r.id = o.receipt_id WHERE r.provider = 'hookledger' AND o.destination = 'sales'`); n != 2 {
			t.Errorf("%d outbox messages for spend alerts, want 2", n)
		}
		// 150,000 requests: 990.00 up to 100,000, 250.00 above, the fee.
		if a := spendNow(t, e, "cus_1"); a.Spent.String() != "1269.00" || a.Allowed || a.Remaining.String() != "0.00" {
			t.Errorf("spend now = %+v, want 1269.00, not allowed", a)
		}
		checkSpendVerifies(t, e, 2)
	})
}

// The hard spend limit turns allowed false at exactly 1000.00: 98,099.4
// requests spend 999.99 (970.994 rounds to 970.99), half a request more
// spends 1000.00 (970.999 rounds to 971.00). A customer's override raises
// the cap from its date.
func TestSpendHardLimitFlipsAtExactlyTheAmount(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newSpendEnv(t, backend)
		send(t, e, "a", testenv.UsageBody("cus_2", "api_requests", "98099.4"))
		a := spendNow(t, e, "cus_2")
		if a.Spent.String() != "999.99" || !a.Allowed || a.Remaining.String() != "0.01" || a.Limit.String() != "1000.00" || a.Kind != "hard" {
			t.Fatalf("at 999.99: %+v", a)
		}
		send(t, e, "b", testenv.UsageBody("cus_2", "api_requests", "0.5"))
		a = spendNow(t, e, "cus_2")
		if a.Spent.String() != "1000.00" || a.Allowed || a.Remaining.String() != "0.00" || a.Fee.String() != "29.00" ||
			len(a.Meters) != 1 || a.Meters[0].Amount.String() != "971.00" || a.Meters[0].Quantity.String() != "98099.9" {
			t.Fatalf("at 1000.00: %+v", a)
		}
		policy := spendChecker(e).Policy
		// An amount finer than the plans' currency (USD: cents) is refused
		// and stores nothing.
		if _, err := entitle.SetSpendOverride(t.Context(), e.DB, policy, entitle.SpendOverride{Customer: "cus_2", Limit: pricing.MustDecimal("2000.001"),
			EffectiveFrom: "2026-11-01", RecordedAt: time.Now()}); !errors.Is(err, entitle.ErrBadOverride) || !strings.Contains(err.Error(), "3 decimal places") {
			t.Fatalf("override of 2000.001 USD: %v", err)
		}
		if n := e.Count("spend_overrides"); n != 0 {
			t.Fatalf("%d spend overrides after a refused one", n)
		}
		if _, err := entitle.SetSpendOverride(t.Context(), e.DB, policy, entitle.SpendOverride{Customer: "cus_2", Limit: pricing.MustDecimal("2000.00"),
			EffectiveFrom: "2026-11-01", RecordedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if a = spendNow(t, e, "cus_2"); !a.Allowed || a.Limit.String() != "2000.00" || a.Remaining.String() != "1000.00" || a.Override != 1 {
			t.Fatalf("after the override: %+v", a)
		}
		// Another customer without usage spends the fee; unknown meters spend nothing.
		if a = spendNow(t, e, "cus_3"); a.Spent.String() != "29.00" || !a.Allowed {
			t.Fatalf("no usage: %+v", a)
		}
	})
}

// A customer's spend override moves the alerts that are a percentage of the
// limit: under 2000.00, 80% is 1600.00, not the plan's 800.00. 80,000
// requests spend 819.00 (500.00 fires, 80% does not); 216,200 spend
// 1019.00 + 0.005 × 116,200 = 1600.00, and 80% fires there.
func TestSpendOverrideMovesAPercentAlert(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newSpendEnv(t, backend)
		if _, err := entitle.SetSpendOverride(t.Context(), e.DB, spendChecker(e).Policy, entitle.SpendOverride{Customer: "cus_4",
			Limit: pricing.MustDecimal("2000.00"), EffectiveFrom: "2026-01-01", RecordedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		first := send(t, e, "a", testenv.UsageBody("cus_4", "api_requests", "80000"))
		if cs := spendCrossings(t, e); len(cs) != 1 || cs[0].Threshold != "500.00" || cs[0].RowID != first {
			t.Fatalf("at 819.00 under 2000.00: crossings %+v, want 500.00 only", cs)
		}
		last := send(t, e, "b", testenv.UsageBody("cus_4", "api_requests", "136200"))
		cs := spendCrossings(t, e)
		if len(cs) != 2 || cs[1].Threshold != "80%" || cs[1].Value != "1600.00" || cs[1].Spent != "1600.00" || cs[1].RowID != last {
			t.Fatalf("at 1600.00 under 2000.00: crossings %+v, want 80%% at 1600.00 by row %d", cs, last)
		}
	})
}

// A void that takes spend back below a threshold that fired, and usage that
// then reaches it again, do not fire it again in the month; December
// re-arms it.
func TestSpendThresholdDoesNotRefireAfterAVoid(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newSpendEnv(t, backend)
		row := send(t, e, "a", testenv.UsageBody("cus_1", "api_requests", "48100")) // 500.00
		if err := e.Writer.Submit(t.Context(), &custody.VoidEvent{Void: ledger.Void{Provider: "default", EventID: "a", Reason: "test traffic", Actor: "ana"}}); err != nil {
			t.Fatal(err)
		}
		if a := spendNow(t, e, "cus_1"); a.Spent.String() != "29.00" {
			t.Fatalf("after the void: %+v", a)
		}
		send(t, e, "b", testenv.UsageBody("cus_1", "api_requests", "48100")) // 500.00 again
		cs := spendCrossings(t, e)
		if len(cs) != 1 || cs[0].RowID != row || cs[0].Threshold != "500.00" {
			t.Fatalf("crossings = %+v, want 500.00 once, by row %d", cs, row)
		}
		dec := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":48100,"occurred_at":"2026-12-02T10:00:00Z"}}`)
		decRow := send(t, e, "c", dec)
		if cs := spendCrossings(t, e); len(cs) != 2 || cs[1].RowID != decRow || cs[1].Spent != "500.00" {
			t.Fatalf("crossings = %+v, want 500.00 again in December by row %d", cs, decRow)
		}
		checkSpendVerifies(t, e, 2)
	})
}

// The spend a restart finds, after the usage state is rebuilt from the
// ledger, equals the spend before it and a recomputation from the ledger's
// sums; the hand-computed figures are the invoice's.
func TestSpendAfterRebuildEqualsRecomputation(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newSpendEnv(t, backend)
		for i, q := range []string{"1500.5", "20000", "0.25", "120000"} {
			send(t, e, fmt.Sprintf("e%d", i), testenv.UsageBody(fmt.Sprintf("cus_%d", i%2), "api_requests", q))
		}
		// cus_0: 1,500.75 requests: 5.0075 rounds to 5.01, plus 29.00.
		// cus_1: 140,000: 990.00 + 0.005 × 40,000 = 200.00, + 29.00.
		want := map[string]string{"cus_0": "34.01", "cus_1": "1219.00"}
		before := map[string]string{}
		for c, w := range want {
			if before[c] = spendNow(t, e, c).Spent.String(); before[c] != w {
				t.Errorf("%s spent %s, want %s", c, before[c], w)
			}
		}
		e.Reopen()
		// Built again from the ledger (another zone, then UTC again).
		for _, zone := range []string{"Pacific/Kiritimati", "UTC"} {
			if built, err := e.Writer.BuildUsageState(t.Context(), zone); err != nil || !built {
				t.Fatalf("rebuild in %s: %v %v", zone, built, err)
			}
		}
		sums, err := ledger.SumUsageState(t.Context(), e.DB, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		v, err := e.Config.Catalog.Version("team", "2026-11-01")
		if err != nil {
			t.Fatal(err)
		}
		start, _ := ledger.MonthOf(e.Now().UnixMilli(), time.UTC)
		for c, w := range want {
			got := spendNow(t, e, c).Spent.String()
			s := sums[ledger.StateKey{Customer: c, Meter: "api_requests", PeriodStart: start}]
			recomputed, err := v.Spent(map[string]pricing.Decimal{"api_requests": s.Used.Decimal()})
			if err != nil {
				t.Fatal(err)
			}
			if got != w || got != before[c] || recomputed.Total.String() != w {
				t.Errorf("%s: after the rebuild %s, before %s, recomputed %s, want %s", c, got, before[c], recomputed.Total, w)
			}
		}
	})
}

// verify recomputes every spend crossing at its row: a crossing whose
// recorded spend the ledger does not give, or whose row does not exist, is
// reported.
func TestVerifyChecksSpendCrossings(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newSpendEnv(t, backend)
		row := send(t, e, "a", testenv.UsageBody("cus_1", "api_requests", "48100"))
		checkSpendVerifies(t, e, 1)
		var snap string
		if err := e.DB.Read.Get(&snap, `SELECT plan_snapshot FROM spend_crossings`); err != nil {
			t.Fatal(err)
		}
		start, end := ledger.MonthOf(e.Now().UnixMilli(), time.UTC)
		forge := func(threshold, spent string, row int64) {
			e.Exec(`INSERT INTO spend_crossings (customer_id, period_start, period_end, threshold, threshold_value, limit_value,
				spent, currency, plan, plan_snapshot, row_id, receipt_id, crossed_at)
				VALUES ('cus_1', ?, ?, ?, '800.00', '1000.00', ?, 'USD', 'team@2026-01-01', ?, ?, 0, 0)`, start, end, threshold, spent, snap, row)
		}
		forge("80%", "600.00", row)
		forge("90%", "900.00", 9999)
		rep, err := invoice.Verify(t.Context(), e.DB)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{
			fmt.Sprintf("spend at row %d recomputes to 500.00 USD, the crossing says 600.00", row): true,
			"ledger row 9999, which crossed 90%, does not exist":                                   true,
		}
		c := spendCheck(t, rep)
		if c.Checked != 3 || len(c.Problems) != 2 {
			t.Errorf("spend crossings: %+v, want 3 checked, 2 problems", c)
		}
		for _, p := range c.Problems {
			if !want[p.Msg] {
				t.Errorf("problem %q, want one of %v", p.Msg, want)
			}
		}
	})
}

// spendCheck is verify's spend crossings check in rep; its absence fails
// the test.
func spendCheck(t *testing.T, rep *invoice.VerifyReport) ledger.CheckResult {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == "spend crossings" {
			return c
		}
	}
	t.Fatalf("verify ran no spend crossings check: %+v", rep.Checks)
	return ledger.CheckResult{}
}

// checkSpendVerifies runs verify: no problem, and the spend crossings
// check counted n.
func checkSpendVerifies(t *testing.T, e *env, n int64) {
	t.Helper()
	rep, err := invoice.Verify(context.Background(), e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.First(); p != nil {
		t.Errorf("verify: %v", p)
	}
	if c := spendCheck(t, rep); c.Checked != n {
		t.Errorf("verify's spend crossings: %+v, want %d checked", c, n)
	}
}

// GET /v1/spend on the API's listener, and the batch form with
// spend=true: a key is required, the answers are the checker's, and a
// customer whose plan keeps no spend answers spent null, allowed.
func TestSpendOverHTTP(t *testing.T) {
	e := newSpendEnv(t, "sqlite")
	send(t, e, "a", testenv.UsageBody("cus_1", "api_requests", "98100")) // 1000.00
	key, _ := e.CreateKey("app", 0, 0)
	get := func(path, key string) (int, string) { t.Helper(); return getWithKey(t, e, path, key) }
	for _, c := range []struct {
		path, key string
		code      int
		has       string
	}{
		{"/v1/spend/cus_1", "", 401, `"reason":"missing_key"`},
		{"/v1/spend/cus_1", key, 200, `"plan":"team@2026-01-01","currency":"USD","spent":"1000.00","limit":"1000.00","kind":"hard","remaining":"0.00","allowed":false`},
		{"/v1/entitlements/cus_1?spend=true", key, 200, `{"entitlements":[],"spend":{"customer":"cus_1","plan":"team@2026-01-01","currency":"USD","spent":"1000.00"`},
		{"/v1/entitlements/cus_1?meter=api_requests&spend=true", key, 200, `"allowed":true,"period_start"`},
		{"/v1/entitlements/cus_1?meter=api_requests&spend=true", key, 200, `"spend":{"customer":"cus_1","plan":"team@2026-01-01","currency":"USD","spent":"1000.00"`},
		{"/v1/entitlements/cus_1?meter=api_requests", key, 200, `"meter":"api_requests"`},
		{"/v1/entitlements/cus_1?spend=maybe", key, 400, `"reason":"bad_request"`},
		{"/v1/spend/%00", key, 400, `"reason":"bad_request"`},
	} {
		code, body := get(c.path, c.key)
		if code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("GET %s: %d %s, want %d with %s", c.path, code, body, c.code, c.has)
		}
	}
	if _, body := get("/v1/entitlements/cus_1?meter=api_requests", key); strings.Contains(body, `"spend"`) {
		t.Errorf("spend without spend=true: %s", body)
	}
}

// A batch answer's meters and spend are of one instant: a clock that
// reaches the next month between two readings cannot split them.
func TestReplyIsOfOneInstant(t *testing.T) {
	e := newSpendEnv(t, "sqlite")
	c := spendChecker(e)
	readings := 0
	c.Now = func() time.Time {
		readings++
		if readings == 1 {
			return time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC)
		}
		return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	}
	r, err := c.Reply(t.Context(), "cus_1", []string{"api_requests"}, true)
	if err != nil || len(r.Entitlements) != 1 || r.Spend == nil {
		t.Fatalf("reply: %+v, %v", r, err)
	}
	if got := r.Entitlements[0].PeriodStart; got != "2026-11-01T00:00:00Z" || r.Spend.PeriodStart != got {
		t.Errorf("meter's period from %s, spend's from %s: want both 2026-11-01T00:00:00Z", got, r.Spend.PeriodStart)
	}
}
