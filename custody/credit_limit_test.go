package custody_test

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// creditLimit is the plan "credit"'s limit of kind credit on api_requests.
const creditLimit = "    limits:\n      - {meter: api_requests, kind: credit}\n"

func creditNow(t *testing.T, e *env) entitle.Entitlement {
	t.Helper()
	en, err := (&entitle.Checker{DB: e.DB, Policy: entitle.NewPolicy(e.Config.Catalog, "credit"), Now: e.Now}).Check(t.Context(), "cus_1", "api_requests")
	if err != nil {
		t.Fatal(err)
	}
	if en.Kind != entitle.LimitCredit || en.Limit != nil || en.Remaining != nil || en.Credit == nil {
		t.Fatalf("a credit limit's answer: %+v", en)
	}
	return en
}

func wantCredit(t *testing.T, en entitle.Entitlement, allowed bool, spent, balance, drawn, available string) {
	t.Helper()
	c := en.Credit
	if en.Allowed != allowed || c.Plan != "credit@2026-01-01" || c.Currency != "USD" || c.Spent.String() != spent || c.Balance.String() != balance ||
		c.Drawn.String() != drawn || c.Available.String() != available {
		t.Errorf("allowed %v, credit %+v; want allowed %v, spent %s balance %s drawn %s available %s", en.Allowed, *c, allowed, spent, balance, drawn, available)
	}
}

// A limit of kind credit allows usage while the customer's credit covers
// the month's spend: no grant, nothing allowed; a grant of 100.00 and
// 9,999 requests at 0.01 (99.99) leave 0.01, allowed; the 10,000th takes
// the spend to exactly the balance and the answer to false; a second grant
// raises the balance and allows again. Over HTTP the answer carries the
// numbers.
func TestCreditLimitCheckTurnsFalseAtTheBalance(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newCreditEnv(t, backend, creditLimit, "")
		wantCredit(t, creditNow(t, e), false, "0.00", "0.00", "0.00", "0.00")
		grantCredit(t, e, "g1", "100.00", 50)
		wantCredit(t, creditNow(t, e), true, "0.00", "100.00", "0.00", "100.00")
		send(t, e, "a", testenv.UsageBody("cus_1", "api_requests", "9999"))
		wantCredit(t, creditNow(t, e), true, "99.99", "100.00", "99.99", "0.01")
		send(t, e, "b", testenv.UsageBody("cus_1", "api_requests", "1"))
		wantCredit(t, creditNow(t, e), false, "100.00", "100.00", "100.00", "0.00")
		send(t, e, "c", testenv.UsageBody("cus_1", "api_requests", "1"))
		wantCredit(t, creditNow(t, e), false, "100.01", "100.00", "100.00", "0.00")

		key, _ := e.CreateKey("app", 0, 0)
		code, body := getWithKey(t, e, "/v1/entitlements/cus_1/api_requests", key)
		var en entitle.Entitlement
		if err := json.Unmarshal([]byte(body), &en); code != 200 || err != nil {
			t.Fatalf("GET: %d %s %v", code, body, err)
		}
		for _, want := range []string{`"limit":null`, `"kind":"credit"`, `"remaining":null`, `"allowed":false`,
			`"credit":{"plan":"credit@2026-01-01","currency":"USD","spent":"100.01","balance":"100.00","drawn":"100.00","available":"0.00"}`} {
			if !strings.Contains(body, want) {
				t.Errorf("GET answer %s\nlacks %s", body, want)
			}
		}
		grantCredit(t, e, "g2", "50.00", 50)
		wantCredit(t, creditNow(t, e), true, "100.01", "150.00", "100.01", "49.99")
	})
}

// consumeOp is a consume of quantity as the ingest API's handler builds it.
func consumeOp(e *env, id, quantity string) *custody.Consume {
	q, _ := ledger.ParseRowQuantity(quantity)
	body := ledger.ConsumeBody(ledger.ConsumeType, id, "cus_1", "api_requests", q, e.Now())
	sum := sha256.Sum256(body)
	d := &custody.Delivery{Provider: ingest.Scope("app"), EventID: ingest.EventID(ledger.ConsumeSource, id), EventType: ledger.ConsumeType,
		Body: body, BodySHA256: sum[:], Source: custody.SourceAPI, HandlerVersion: "test", ReceivedAt: e.Now(),
		Attempt: custody.Attempt{StatusCode: 200}}
	d.Classify(e.Mapper())
	return &custody.Consume{Delivery: d, ID: id}
}

// A consume against a limit of kind credit is allowed only if the month's
// spend after it stays within the balance: at 99.99 of 100.00, 2 more
// (100.01) are refused and write no row (the refused receipt says why), 1
// more (100.00) is allowed and writes its row, and then nothing more is.
// The answer carries the credit after the consume (a refused one: as it
// stands); over HTTP it has no limit fields.
func TestCreditConsumeRefusedPastTheBalance(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newCreditEnv(t, backend, creditLimit, "")
		grantCredit(t, e, "g1", "100.00", 50)
		send(t, e, "a", testenv.UsageBody("cus_1", "api_requests", "9999"))
		rows := e.Count("metered_usage")

		op := consumeOp(e, "req_1", "2")
		if err := e.Writer.Submit(t.Context(), op); err != nil {
			t.Fatal(err)
		}
		if op.Allowed || op.HasLimit || op.Credit == nil || op.Credit.Spent.String() != "99.99" || op.Credit.Available.String() != "0.01" ||
			op.Used.String() != "9999" {
			t.Errorf("refused consume: %+v %+v", op, op.Credit)
		}
		if n := e.Count("metered_usage"); n != rows {
			t.Fatalf("a refused consume wrote %d rows", n-rows)
		}
		var refused string
		if err := e.DB.Read.Get(&refused, `SELECT error FROM receipts WHERE event_id = ? AND event_type = ? AND status = 'ignored'`,
			ingest.EventID(ledger.ConsumeSource, "req_1"), ledger.ConsumeRefusedType); err != nil ||
			refused != "refused: 2 more would take the month's spend to 100.01 USD, past the credit balance of 100.00 USD (used 9999)" {
			t.Errorf("refused receipt: %q %v", refused, err)
		}

		op = consumeOp(e, "req_2", "1")
		if err := e.Writer.Submit(t.Context(), op); err != nil {
			t.Fatal(err)
		}
		if !op.Allowed || op.Credit == nil || op.Credit.Spent.String() != "100.00" || op.Credit.Drawn.String() != "100.00" ||
			op.Credit.Available.String() != "0.00" || op.Used.String() != "10000" {
			t.Errorf("allowed consume: %+v %+v", op, op.Credit)
		}
		if n := e.Count("metered_usage"); n != rows+1 {
			t.Fatalf("an allowed consume wrote %d rows, want 1", n-rows)
		}

		key, _ := e.CreateKey("app", 0, 0)
		code, r, body := consume(t, e, key, "cus_1", "api_requests", `{"id":"req_3","quantity":"1"}`)
		if code != 200 || r.Allowed || r.Duplicate || r.Used != "10000" || r.Limit != "" || r.Kind != "credit" || r.Remaining != "" ||
			r.Credit == nil || r.Credit.Spent.String() != "100.00" || r.Credit.Available.String() != "0.00" {
			t.Errorf("consume over HTTP past the balance: %d %s", code, body)
		}
		code, r, body = consume(t, e, key, "cus_1", "api_requests", `{"id":"req_2","quantity":"1"}`)
		if code != 200 || !r.Allowed || !r.Duplicate || r.Used != "10000" {
			t.Errorf("a repeat of the allowed consume: %d %s", code, body)
		}
		if n := e.Count("metered_usage"); n != rows+1 {
			t.Errorf("%d rows after the refusal and the repeat, want %d", n, rows+1)
		}
		wantCredit(t, creditNow(t, e), false, "100.00", "100.00", "100.00", "0.00")
	})
}

// An override of a quantity replaces a credit limit: hard, unless it says
// otherwise, and checked by quantity again.
func TestOverrideReplacesACreditLimit(t *testing.T) {
	e := newCreditEnv(t, "", creditLimit, "")
	if _, err := entitle.SetOverride(t.Context(), e.DB, entitle.Override{Customer: "cus_1", Meter: "api_requests",
		Limit: ledger.TotalOf(5 * ledger.Scale), EffectiveFrom: "2026-01-01"}, ledger.NewMeters(e.Config.Meters)); err != nil {
		t.Fatal(err)
	}
	en, err := (&entitle.Checker{DB: e.DB, Policy: entitle.NewPolicy(e.Config.Catalog, "credit"), Now: e.Now}).Check(t.Context(), "cus_1", "api_requests")
	if err != nil {
		t.Fatal(err)
	}
	if en.Kind != "hard" || en.Limit == nil || en.Limit.String() != "5" || en.Credit != nil || !en.Allowed {
		t.Errorf("overridden credit limit: %+v", en)
	}
}
