package receiver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
)

// receipt is the stored verdict on one event.
type receipt struct {
	Status custody.Status `db:"status"`
	Error  string         `db:"error"`
}

func (e *env) receipt(provider, id string) receipt {
	e.T.Helper()
	var r receipt
	if err := e.DB.Read.Get(&r, `SELECT status, COALESCE(error, '') AS error FROM receipts WHERE provider = ? AND event_id = ?`, provider, id); err != nil {
		e.T.Fatalf("receipt %s/%s: %v", provider, id, err)
	}
	return r
}

// usageRows lists the ledger's rows as customer/meter=quantity.
func (e *env) usageRows() []string {
	e.T.Helper()
	var recs []schema.LedgerRow
	if err := e.DB.Read.Select(&recs, `SELECT * FROM metered_usage ORDER BY id`); err != nil {
		e.T.Fatal(err)
	}
	var out []string
	for i := range recs {
		r := ledger.StoredRow(&recs[i])
		out = append(out, fmt.Sprintf("%s/%s=%s", r.Customer, r.Meter, r.Quantity))
	}
	return out
}

// nestedUsage is a valid usage event whose "pad" holds arrays nested so that the whole body is
// depth levels deep (the event object is level 1).
func nestedUsage(depth int) []byte {
	n := depth - 1
	return []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":1},"pad":` +
		strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
}

// The body: ten million "[" under a 32 MiB max_body crashed serve with a fatal stack
// overflow. It is refused, quickly, and nothing is written.
func TestTenMillionOpenBracketsAreRefused(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.Providers[0].MaxBody = 32 << 20 })
	body := bytes.Repeat([]byte("["), 10_000_000)
	start := time.Now()
	r := e.Send("msg_deep", body)
	if r.Code != http.StatusBadRequest || r.Body.Accepted || !strings.Contains(r.Body.Error, "128") {
		t.Fatalf("got %d %+v, want 400 naming the limit of 128", r.Code, r.Body)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("receipts, attempts, usage = %v, want nothing written", got)
	}
}

func TestNestingLimit(t *testing.T) {
	t.Run("default 128: at the limit is stored, one deeper is refused", func(t *testing.T) {
		e := newEnv(t)
		var reasons []string
		e.Server.Observe = func(o receiver.Observation) { reasons = append(reasons, o.Reason) }
		if r := e.Send("msg_at", nestedUsage(128)); r.Code != 200 || r.Body.Status != custody.StatusApplied {
			t.Fatalf("depth 128: %d %+v", r.Code, r.Body)
		}
		r := e.Send("msg_over", nestedUsage(129))
		if r.Code != http.StatusBadRequest || r.Body.Error != "body nests deeper than 128 levels (max_depth)" {
			t.Fatalf("depth 129: %d %+v", r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{1, 1, 1} {
			t.Errorf("receipts, attempts, usage = %v, want only the first event", got)
		}
		if reasons[1] != "too_deep" {
			t.Errorf("reason %q, want too_deep", reasons[1])
		}
	})
	t.Run("max_depth per provider", func(t *testing.T) {
		e := newEnv(t, func(c *config.Config) { c.Providers[0].MaxDepth = 4 })
		if r := e.Send("msg_4", nestedUsage(4)); r.Code != 200 {
			t.Fatalf("depth 4: %d %+v", r.Code, r.Body)
		}
		if r := e.Send("msg_5", nestedUsage(5)); r.Code != http.StatusBadRequest || !strings.Contains(r.Body.Error, "deeper than 4 levels") {
			t.Fatalf("depth 5: %d %+v", r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{1, 1, 1} {
			t.Errorf("receipts, attempts, usage = %v, want only the first event", got)
		}
	})
}

// Refusing a deep body costs no stack: memory per request stays proportional to the body.
// (gjson.ValidBytes grew each request's stack to about 60 MB for 256 KiB of "[".)
func TestDeepBodiesDoNotGrowTheStack(t *testing.T) {
	e := newEnv(t)
	body := bytes.Repeat([]byte("["), 256<<10-1)
	h := e.SignDefault("msg_deep", body)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Go(func() { codes[i] = e.PostReply("default", h, body).Code })
	}
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	for _, c := range codes {
		if c != http.StatusBadRequest {
			t.Fatalf("codes %v, want 400s", codes)
		}
	}
	if grown := int64(after.StackSys) - int64(before.StackSys); grown > 16<<20 {
		t.Errorf("goroutine stacks grew by %d MB for 8 deep bodies", grown>>20)
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("wrote %v", got)
	}
}

// A key repeated in one object means its last value, on every path the receiver reads.
func TestDuplicateKeysLastWins(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		id, body string
		want     []string // usage rows after this event
		status   custody.Status
	}{
		{"msg_flat", `{"type":"usage.recorded","data":{"customer":"a","customer":"b","meter":"api_requests","quantity":1}}`,
			[]string{"b/api_requests=1"}, custody.StatusApplied},
		{"msg_nested", `{"type":"usage.recorded","data":{"customer":"c","meter":"api_requests","quantity":1},` +
			`"data":{"customer":"d","meter":"api_requests","quantity":2}}`,
			[]string{"b/api_requests=1", "d/api_requests=2"}, custody.StatusApplied},
		{"msg_type", `{"type":"other","data":{"customer":"e","meter":"api_requests","quantity":3},"type":"usage.recorded"}`,
			[]string{"b/api_requests=1", "d/api_requests=2", "e/api_requests=3"}, custody.StatusApplied},
		// The last data object replaces the first; it is not merged into it.
		{"msg_replaced", `{"type":"usage.recorded","data":{"customer":"f","meter":"api_requests","quantity":4},"data":{"meter":"api_requests","quantity":4}}`,
			[]string{"b/api_requests=1", "d/api_requests=2", "e/api_requests=3"}, custody.StatusFailed},
	}
	for _, c := range cases {
		r := e.Send(c.id, []byte(c.body))
		if r.Code != 200 || r.Body.Status != c.status {
			t.Fatalf("%s: %d %+v, want %s", c.id, r.Code, r.Body, c.status)
		}
		if got := e.usageRows(); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: rows %v, want %v", c.id, got, c.want)
		}
	}
	if got := e.receipt("default", "msg_replaced").Error; got != "customer: data.customer is missing" {
		t.Errorf("error %q", got)
	}
	// What the providers' own decoders make of the same bytes.
	var v struct {
		Data struct{ Customer string } `json:"data"`
	}
	json.Unmarshal([]byte(cases[0].body), &v)
	if v.Data.Customer != "b" {
		t.Errorf("encoding/json reads customer %q", v.Data.Customer)
	}
}

// A Stripe body with two "id" keys is stored under the id stripe-go's ConstructEvent reads.
func TestStripeBodyWithTwoIDs(t *testing.T) {
	const secret = "whsec_test_9f8e7d6c5b4a"
	e := newEnv(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "stripe", Scheme: "stripe",
			Secrets: []config.Secret{{Value: secret}}, Tolerance: config.Duration{Duration: 5 * time.Minute}, MaxBody: 1 << 20})
	})
	e.Clock.Set(time.Now()) // stripe-go signs with the real clock
	body := []byte(`{"id":"evt_first","object":"event","type":"invoice.paid","data":{"object":{}},"id":"evt_last"}`)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret})
	ev, err := webhook.ConstructEventWithOptions(sp.Payload, sp.Header, secret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
	if err != nil || ev.ID != "evt_last" {
		t.Fatalf("stripe-go reads %q, %v", ev.ID, err)
	}
	h := http.Header{}
	h.Set("Stripe-Signature", sp.Header)
	if r := e.PostReply("stripe", h, sp.Payload); r.Code != 200 || r.Body.EventID != ev.ID {
		t.Fatalf("got %d %+v, want event %s", r.Code, r.Body, ev.ID)
	}
	var ids []string
	e.DB.Read.Select(&ids, `SELECT event_id FROM receipts WHERE provider = 'stripe'`)
	if fmt.Sprint(ids) != "[evt_last]" {
		t.Errorf("receipts %v, want [evt_last]", ids)
	}
}

func TestSlackChallengeWithDuplicateKeys(t *testing.T) {
	e := newEnv(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "slack", Scheme: "slack",
			Secrets: []config.Secret{{Value: "8f742231b10e8888abcd99yyyzzz85a5"}}, Tolerance: config.Duration{Duration: 5 * time.Minute}, MaxBody: 1 << 16})
	})
	body := []byte(`{"type":"event_callback","challenge":"first","type":"url_verification","challenge":"last"}`)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(e.Now().Unix(), 10))
	e.Server.Providers["slack"].Scheme.Sign(h, body, e.Server.Providers["slack"].Keys[0], "", "", e.Now())
	req, _ := http.NewRequest(http.MethodPost, e.HTTP.URL+"/webhooks/slack", bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.TrimSpace(string(out)) != `{"challenge":"last"}` {
		t.Errorf("got %d %s", resp.StatusCode, out)
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("wrote %v", got)
	}
}

// A customer id or meter name that is not clean text fails the mapping: the event is kept,
// with the reason, and the ledger gets no row.
func TestIdentifiersMustBeCleanText(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		id, customer, meter, want string
	}{
		{"msg_nul", `"cus_\u0000"`, `"api_requests"`, "customer: contains a control character (U+0000)"},
		{"msg_ff", "\"cus_\xff\"", `"api_requests"`, "customer: is not valid UTF-8"},
		{"msg_tab", `"cus\t1"`, `"api_requests"`, "customer: contains a control character (U+0009)"},
		{"msg_del", `"cus_\u007f"`, `"api_requests"`, "customer: contains a control character (U+007F)"},
		{"msg_c1", `"cus_\u0085"`, `"api_requests"`, "customer: contains a control character (U+0085)"},
		{"msg_surrogate", `"cus_\ud800"`, `"api_requests"`, "customer: contains U+FFFD, the replacement character (for a character lost before it reached hookledger)"},
		{"msg_fffd", `"cus_\ufffd"`, `"api_requests"`, "customer: contains U+FFFD, the replacement character (for a character lost before it reached hookledger)"},
		{"msg_meter", `"cus_1"`, `"api\u0000requests"`, "meter: contains a control character (U+0000)"},
	}
	for _, c := range cases {
		body := []byte(`{"type":"usage.recorded","data":{"customer":` + c.customer + `,"meter":` + c.meter + `,"quantity":1}}`)
		if r := e.Send(c.id, body); r.Code != 200 || r.Body.Status != custody.StatusFailed {
			t.Fatalf("%s: %d %+v, want 200 failed", c.id, r.Code, r.Body)
		}
		if got := e.receipt("default", c.id); got.Status != custody.StatusFailed || got.Error != c.want {
			t.Errorf("%s: receipt %+v, want failed: %s", c.id, got, c.want)
		}
	}
	if n := e.Count("metered_usage"); n != 0 {
		t.Errorf("%d usage rows, want 0", n)
	}
	// Text that merely is not ASCII is fine.
	if r := e.Send("msg_ok", []byte(`{"type":"usage.recorded","data":{"customer":"cus_é😀","meter":"api_requests","quantity":1}}`)); r.Code != 200 || r.Body.Status != custody.StatusApplied {
		t.Fatalf("got %d %+v", r.Code, r.Body)
	}
	if got := e.usageRows(); fmt.Sprint(got) != "[cus_é😀/api_requests=1]" {
		t.Errorf("rows %v", got)
	}
}

// An event id is the receipt's key: one that is not clean text is refused like a missing one,
// with 400, and nothing is written, whether it came in a header or in the body.
func TestEventIDsMustBeCleanText(t *testing.T) {
	const secret = "whsec_test_9f8e7d6c5b4a"
	e := newEnv(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "stripe", Scheme: "stripe",
			Secrets: []config.Secret{{Value: secret}}, Tolerance: config.Duration{Duration: 5 * time.Minute}, MaxBody: 1 << 20})
	})
	body := testenv.UsageBody("cus_1", "api_requests", "1")
	for id, want := range map[string]string{
		"msg_\xff":   "event id: is not valid UTF-8",
		"msg\tid":    "event id: contains a control character (U+0009)",
		"msg_\u0085": "event id: contains a control character (U+0085)",
		"msg_\ufffd": "event id: contains U+FFFD",
	} {
		r := e.Send(id, body)
		if r.Code != http.StatusBadRequest || !strings.HasPrefix(r.Body.Error, want) {
			t.Errorf("webhook-id %q: %d %+v, want 400 %q", id, r.Code, r.Body, want)
		}
	}
	e.Clock.Set(time.Now())
	stripeBody := []byte(`{"id":"evt_\u0000","object":"event","type":"invoice.paid"}`)
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: stripeBody, Secret: secret})
	h := http.Header{}
	h.Set("Stripe-Signature", sp.Header)
	if r := e.PostReply("stripe", h, sp.Payload); r.Code != http.StatusBadRequest || r.Body.Error != "event id: contains a control character (U+0000)" {
		t.Errorf("stripe id with NUL: %d %+v", r.Code, r.Body)
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("receipts, attempts, usage = %v, want nothing written", got)
	}
}
