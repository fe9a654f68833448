package admin

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// grantJSON is a grant as the credits endpoints show it.
type grantJSON struct {
	ID, Customer, Currency, Category, Amount, Balance, Status, Reason, Actor string
	Priority                                                                 int64
	EffectiveAt                                                              string  `json:"effective_at"`
	ExpiresAt                                                                *string `json:"expires_at"`
}

type grantAnswerJSON struct {
	Duplicate *bool      `json:"duplicate"`
	Grant     *grantJSON `json:"grant"`
}

type standingJSON struct {
	Customer, At, Period string
	Currencies           []struct{ Currency, Balance, Drawn, Available string }
	Grants               []struct {
		Grant            grantJSON
		Drawn, Available string
	}
}

// creditRows are the credit ledger's rows, in id order, as
// "KIND GRANT CUSTOMER AMOUNT CURRENCY BALANCE CATEGORY PRIORITY ACTOR".
func creditRows(t *testing.T, e *testenv.Env) []string {
	t.Helper()
	es, err := e.DB.CreditEntries(context.Background(), schema.CreditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range es {
		out = append(out, fmt.Sprint(x.Kind, " ", x.GrantID, " ", x.Customer, " ", x.Amount, " ", x.Currency, " ", x.Balance, " ",
			x.Category, " ", x.Priority, " ", x.Actor))
	}
	return out
}

// Grants through the API on both backends: a new grant is one row, a
// repeat is a duplicate that writes nothing, the id of another grant is
// refused, and a bad grant stores nothing.
func TestCreditGrantAPI(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e, c, url := customersEnv(t, backend)
		c.Writer = e.Writer
		grants := url + "/v1/customers/cus_1/credits"
		body := `{"id":"grant_a","amount":"100.00","currency":"USD","reason":"prepaid December"}`

		var a grantAnswerJSON
		callJSON(t, "POST", grants, body, 201, &a)
		if a.Duplicate == nil || *a.Duplicate || a.Grant == nil {
			t.Fatalf("new grant: %+v", a)
		}
		g := *a.Grant
		if g.ID != "grant_a" || g.Customer != "cus_1" || g.Amount != "100.00" || g.Balance != "100.00" || g.Currency != "USD" ||
			g.Category != "paid" || g.Priority != 50 || g.Status != "active" || g.Actor != "admin API" || g.Reason != "prepaid December" ||
			g.EffectiveAt != "2026-11-29T12:00:00Z" || g.ExpiresAt != nil {
			t.Errorf("new grant: %+v", g)
		}
		one := []string{"grant grant_a cus_1 100.00 USD 100.00 paid 50 admin API"}
		sameRows(t, "after the grant", creditRows(t, e), one)

		// The same id and body: a duplicate, nothing written.
		a = grantAnswerJSON{}
		callJSON(t, "POST", grants, body, 200, &a)
		if a.Duplicate == nil || !*a.Duplicate || a.Grant == nil || a.Grant.ID != "grant_a" || a.Grant.Amount != "100.00" || a.Grant.Balance != "100.00" {
			t.Errorf("repeat: %+v", a)
		}
		sameRows(t, "after the repeat", creditRows(t, e), one)

		for _, tc := range []struct {
			name, path, body string
			code             int
			want             string
		}{
			{"same id, another amount", "cus_1", `{"id":"grant_a","amount":"200.00","currency":"USD","reason":"prepaid December"}`, 409, `"code": "id_conflict"`},
			{"same id, another customer", "cus_2", body, 409, `"code": "id_conflict"`},
			{"an amount finer than a cent", "cus_1", `{"amount":"100.005","currency":"USD","reason":"x"}`, 400, `"code": "bad_grant"`},
			{"an amount as a number", "cus_1", `{"amount":100,"currency":"USD","reason":"x"}`, 400, `"code": "bad_request"`},
			{"an unknown field", "cus_1", `{"amount":"1.00","currency":"USD","reason":"x","note":"y"}`, 400, `unknown field \"note\"`},
			{"not JSON", "cus_1", `amount=1`, 400, `"code": "bad_request"`},
			{"no currency", "cus_1", `{"amount":"1.00","reason":"x"}`, 400, "currency"},
			{"no reason", "cus_1", `{"amount":"1.00","currency":"USD"}`, 400, "a reason is required"},
			{"a NUL in the reason", "cus_1", `{"amount":"1.00","currency":"USD","reason":"a\u0000b"}`, 400, "reason: contains a NUL"},
			{"a priority out of range", "cus_1", `{"amount":"1.00","currency":"USD","reason":"x","priority":1001}`, 400, "priority 1001"},
			{"another category", "cus_1", `{"amount":"1.00","currency":"USD","reason":"x","category":"gift"}`, 400, `category \"gift\"`},
			{"a date that is not RFC 3339", "cus_1", `{"amount":"1.00","currency":"USD","reason":"x","expires_at":"2027-01-01"}`, 400, "expires_at: \\\"2027-01-01\\\" is not an RFC 3339 time"},
			{"an expiry passed", "cus_1", `{"amount":"1.00","currency":"USD","reason":"x","expires_at":"2026-11-01T00:00:00Z"}`, 400, "before now"},
			{"an expiry before the start", "cus_1", `{"amount":"1.00","currency":"USD","reason":"x","effective_at":"2027-02-01T00:00:00Z","expires_at":"2027-01-01T00:00:00Z"}`, 400, "before it takes effect"},
			{"a bad customer id", "cus%01", `{"amount":"1.00","currency":"USD","reason":"x"}`, 400, `"code": "bad_customer"`},
		} {
			code, raw := call(t, "POST", url+"/v1/customers/"+tc.path+"/credits", testToken, tc.body)
			if code != tc.code || !strings.Contains(string(raw), tc.want) {
				t.Errorf("%s: %d %s, want %d with %s", tc.name, code, raw, tc.code, tc.want)
			}
			sameRows(t, tc.name, creditRows(t, e), one)
		}
		if code, _ := call(t, "POST", grants, "", body); code != 401 {
			t.Errorf("a grant without a token: %d", code)
		}
		if code, _ := call(t, "GET", grants, "", ""); code != 401 {
			t.Errorf("credits without a token: %d", code)
		}

		// Every field given; a priority of 0 is kept, not defaulted.
		a = grantAnswerJSON{}
		callJSON(t, "POST", grants, `{"id":"promo_1","amount":"20.00","currency":"USD","category":"promotional","priority":0,`+
			`"effective_at":"2026-11-01T00:00:00Z","expires_at":"2027-01-01T00:00:00Z","reason":"welcome","actor":"ana"}`, 201, &a)
		if g := a.Grant; g == nil || g.Priority != 0 || g.Category != "promotional" || g.Actor != "ana" ||
			g.EffectiveAt != "2026-11-01T00:00:00Z" || g.ExpiresAt == nil || *g.ExpiresAt != "2027-01-01T00:00:00Z" {
			t.Errorf("grant with every field: %+v", a.Grant)
		}
		// Without an id: a new one each time.
		callJSON(t, "POST", grants, `{"amount":"1.00","currency":"USD","reason":"x"}`, 201, &a)
		first := a.Grant.ID
		callJSON(t, "POST", grants, `{"amount":"1.00","currency":"USD","reason":"x"}`, 201, &a)
		if !strings.HasPrefix(first, "grant_") || a.Grant.ID == first {
			t.Errorf("grants without an id: %s then %s", first, a.Grant.ID)
		}
		sameRows(t, "after every grant", creditRows(t, e), append(one,
			"grant promo_1 cus_1 20.00 USD 20.00 promotional 0 ana",
			"grant "+first+" cus_1 1.00 USD 1.00 paid 50 admin API",
			"grant "+a.Grant.ID+" cus_1 1.00 USD 1.00 paid 50 admin API"))

		// A repeat shows the grant as it stands now: after a void, nothing left.
		if err := e.Writer.Submit(context.Background(), &custody.VoidCredit{GrantID: "grant_a", Reason: "refunded", Actor: "ana"}); err != nil {
			t.Fatal(err)
		}
		a = grantAnswerJSON{}
		callJSON(t, "POST", grants, body, 200, &a)
		if a.Duplicate == nil || !*a.Duplicate || a.Grant == nil || a.Grant.Status != "voided" || a.Grant.Amount != "100.00" || a.Grant.Balance != "0.00" {
			t.Errorf("repeat after a void: %+v", a.Grant)
		}
		if n := len(creditRows(t, e)); n != 5 {
			t.Errorf("%d credit rows, want 5 (four grants, a void)", n)
		}

		// Without a writer a grant is refused, and nothing is written.
		c.Writer = nil
		if code, raw := call(t, "POST", grants, testToken, `{"amount":"1.00","currency":"USD","reason":"x"}`); code != 503 {
			t.Errorf("a grant without a writer: %d %s", code, raw)
		}
		if n := len(creditRows(t, e)); n != 5 {
			t.Errorf("%d credit rows, want 5", n)
		}
	})
}

// A customer's standing: each grant's balance, what the open month's
// draft invoice would draw from it in the burn order, and what would
// remain, summed per currency over the active grants.
func TestCreditStandingAPI(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e, c, url := customersEnv(t, backend)
		c.Writer = e.Writer
		// cus_1 is on pro from January: November's draft (no usage) is
		// July's version's fee alone, 39.00 USD.
		callJSON(t, "POST", url+"/v1/customers", `{"id":"cus_1","plan":"pro","from":"2026-01-01"}`, 201, nil)
		credits := url + "/v1/customers/cus_1/credits"

		var st standingJSON
		callJSON(t, "GET", credits, "", 200, &st)
		if st.Customer != "cus_1" || len(st.Currencies) != 0 || len(st.Grants) != 0 || st.At != "2026-11-29T12:00:00Z" {
			t.Errorf("standing before any grant: %+v", st)
		}

		for _, body := range []string{
			`{"id":"paid","amount":"100.00","currency":"USD","reason":"prepaid"}`,
			`{"id":"promo","amount":"20.00","currency":"USD","category":"promotional","priority":10,"reason":"welcome"}`,
			`{"id":"euro","amount":"10.00","currency":"EUR","reason":"other currency"}`,
			`{"id":"short","amount":"5.00","currency":"USD","expires_at":"2026-11-29T13:00:00Z","reason":"one hour"}`,
		} {
			callJSON(t, "POST", credits, body, 201, nil)
		}
		// At 14:00 "short" has expired (no expiry row yet: serve writes
		// it): it pays nothing and counts in no balance. The 39.00 is paid
		// by promo first (priority 10 before 50): 20.00, then paid 19.00.
		e.Clock.Add(2 * time.Hour)
		st = standingJSON{}
		callJSON(t, "GET", credits, "", 200, &st)
		var got []string
		for _, cc := range st.Currencies {
			got = append(got, strings.Join([]string{cc.Currency, cc.Balance, cc.Drawn, cc.Available}, " "))
		}
		sameRows(t, "per currency (balance drawn available)", got, []string{"EUR 10.00 0.00 10.00", "USD 120.00 39.00 81.00"})
		got = nil
		for _, g := range st.Grants {
			got = append(got, strings.Join([]string{g.Grant.ID, g.Grant.Status, g.Grant.Balance, g.Drawn, g.Available}, " "))
		}
		sameRows(t, "per grant (status balance drawn available)", got, []string{
			"paid active 100.00 19.00 81.00",
			"promo active 20.00 20.00 0.00",
			"euro active 10.00 0.00 10.00",
			"short expired 5.00 0.00 0.00",
		})
		if st.Period != "2026-11" || st.At != "2026-11-29T14:00:00Z" {
			t.Errorf("standing's period and time: %q %q", st.Period, st.At)
		}
		// The draft is the preview's: its credits are what the standing draws.
		code, raw := call(t, "GET", url+"/v1/customers/cus_1/invoice/preview", testToken, "")
		for _, want := range []string{`"total": "39.00"`, `"credits": "39.00"`, `"amount_due": "0.00"`} {
			if code != 200 || !strings.Contains(string(raw), want) {
				t.Errorf("preview lacks %s: %d %s", want, code, raw)
			}
		}
		// Reading wrote nothing: four grants, no burn, no expiry.
		if rows := creditRows(t, e); len(rows) != 4 || e.Count("invoices") != 0 {
			t.Errorf("after the reads: %v, %d invoices", rows, e.Count("invoices"))
		}

		// Without plans nothing is priced, so nothing is drawn.
		c.Catalog = nil
		st = standingJSON{}
		callJSON(t, "GET", credits, "", 200, &st)
		got = nil
		for _, cc := range st.Currencies {
			got = append(got, strings.Join([]string{cc.Currency, cc.Balance, cc.Drawn, cc.Available}, " "))
		}
		sameRows(t, "per currency without plans", got, []string{"EUR 10.00 0.00 10.00", "USD 120.00 0.00 120.00"})

		if code, raw := call(t, "GET", url+"/v1/customers/cus%01/credits", testToken, ""); code != 400 || !strings.Contains(string(raw), `"code": "bad_customer"`) {
			t.Errorf("a bad customer id: %d %s", code, raw)
		}
		// Another customer has none of cus_1's grants.
		st = standingJSON{}
		callJSON(t, "GET", url+"/v1/customers/cus_2/credits", "", 200, &st)
		if len(st.Currencies) != 0 || len(st.Grants) != 0 {
			t.Errorf("cus_2: %+v", st)
		}
	})
}
