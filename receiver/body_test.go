package receiver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/receiver"
)

// largeUsage is a usage event for customer padded to exactly size bytes.
func largeUsage(customer string, size int) []byte {
	head := `{"type":"usage.recorded","data":{"customer":"` + customer + `","meter":"api","quantity":1,"occurred_at":"2026-11-29T10:00:00Z"},"pad":"`
	return []byte(head + strings.Repeat("x", size-len(head)-2) + `"}`)
}

// post sends a delivery signed for the "default" provider to addr, on a
// connection of its own, and returns the status, Retry-After and reply.
func (e *env) post(addr, id string, body []byte) (code int, retryAfter, reply string, err error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/default", bytes.NewReader(body))
	if err != nil {
		return 0, "", "", err
	}
	for k, vs := range e.SignDefault(id, body) {
		req.Header[k] = vs
	}
	req.Close = true
	client := &http.Client{Timeout: hangGuard}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b), err
}

// Under serve's default limits, 1,000 unauthenticated connections that each
// announce a max_body (256 KiB) body and send one byte of it hold none of
// the body budget: signed 200 KB deliveries sent while they are all open are
// each accepted on the first try and stored. What limits apply: the default
// max_connections (4096) admits the whole flood, so the deliveries compete
// with it for the budget, not for a connection slot (a flood above the cap
// waits in the kernel's accept queue, and so would they); the body timeout
// is raised from its default 10 s only so that the flood is still open
// however slowly this machine runs the test, which favours the flood.
func TestTricklingFloodDoesNotStarveLargeBodies(t *testing.T) {
	const flood, deliveries, size = 1000, 20, 200_000
	e := newEnv(t)
	lim := e.Config.Limits
	if lim.MaxConnections < flood+deliveries+1 {
		t.Fatalf("max_connections %d does not admit the flood and the deliveries", lim.MaxConnections)
	}
	e.Server.Budget = receiver.NewBodyBudget(lim.BodyBudget)
	e.Server.BodyTimeout = time.Minute
	addr := e.listen(receiver.ListenOptions{MaxConnections: lim.MaxConnections})
	maxBody := e.Server.Providers["default"].MaxBody

	// Each flood connection costs two descriptors in this process (client
	// and server); Go raised the soft limit to the hard one at start, and
	// Open's error names the limit if it is still too low.
	st, err := bench.Stall{Addr: addr, Conns: flood, Send: 1, Declare: maxBody}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	await.Eventually(t, hangGuard, fmt.Sprintf("the %d flood bodies are being read", flood), func() bool { return e.Server.Budget.Reading() == flood })
	if held := e.Server.Budget.Held(); held != 0 {
		t.Errorf("the flood holds %d bytes of the budget; a byte each fits the free first 16 KiB", held)
	}

	type outcome struct {
		code             int
		retryAfter, text string
		err              error
	}
	got := make([]outcome, deliveries)
	var wg sync.WaitGroup
	for i := range deliveries {
		wg.Go(func() {
			o := &got[i]
			o.code, o.retryAfter, o.text, o.err = e.post(addr, fmt.Sprintf("evt_large_%d", i), largeUsage(fmt.Sprintf("cus_%d", i), size))
		})
	}
	wg.Wait()
	for i, o := range got {
		if o.err != nil || o.code != 200 {
			t.Errorf("delivery %d, first try: %d (Retry-After %q) %s %v", i, o.code, o.retryAfter, strings.TrimSpace(o.text), o.err)
		}
	}
	// The deliveries were served with the whole flood still being read.
	if n := e.Server.Budget.Reading(); n != flood {
		t.Errorf("%d flood bodies still being read after the deliveries, want %d", n, flood)
	}
	if got := e.Rows(); got != [3]int{deliveries, deliveries, deliveries} {
		t.Errorf("receipts, attempts, usage rows = %v, want %d of each", got, deliveries)
	}
	for i := range deliveries {
		if !e.stored(fmt.Sprintf("evt_large_%d", i)) {
			t.Errorf("evt_large_%d not stored", i)
		}
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE length(body) = ?`, size); n != deliveries {
		t.Errorf("%d receipts hold the whole %d-byte body, want %d", n, size, deliveries)
	}
	if outcomes := st.Close(); outcomes["still open"] != flood {
		t.Errorf("the flood's connections ended %v, want all %d still open (none answered)", outcomes, flood)
	}
}

// The budget still bounds bytes that did arrive: senders that send most of
// a large body hold budget for it, so a large delivery that finds too little
// room waits, gets 503 with Retry-After and is not stored, while a small one
// (within the free first 16 KiB) is served; once the senders are gone the
// large delivery is accepted, and every byte of the budget is given back.
func TestBodyBudgetChargesArrivedBytes(t *testing.T) {
	const budget, sent = 256 << 10, 100 << 10 // budget: the least the configuration allows, max_body
	e := newEnv(t)
	e.Server.Budget = receiver.NewBodyBudget(budget)
	e.Server.BodyTimeout = time.Minute
	addr := e.listen(receiver.ListenOptions{})
	st, err := bench.Stall{Addr: addr, Conns: 2, Send: sent, Declare: budget}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Each holds at least what it sent past the free 16 KiB: 168 KiB
	// together, which leaves less than a 200 KB body needs.
	await.Eventually(t, hangGuard, "the senders' bytes are charged", func() bool { return e.Server.Budget.Held() >= 2*(sent-16<<10) })

	large := largeUsage("cus_big", 200_000)
	code, retryAfter, text, err := e.post(addr, "evt_large", large)
	if err != nil || code != 503 || retryAfter == "" {
		t.Errorf("large delivery with the budget held: %d (Retry-After %q) %s %v", code, retryAfter, text, err)
	}
	if code, _, text, err := e.post(addr, "evt_small", testenv.UsageBody("cus_small", "api", "1")); err != nil || code != 200 {
		t.Errorf("small delivery with the budget held: %d %s %v", code, text, err)
	}
	if e.stored("evt_large") || !e.stored("evt_small") {
		t.Errorf("stored: evt_large %v, evt_small %v; want only evt_small", e.stored("evt_large"), e.stored("evt_small"))
	}

	st.Close()
	await.Eventually(t, hangGuard, "the senders' budget is given back", func() bool { return e.Server.Budget.Held() == 0 })
	if code, _, text, err := e.post(addr, "evt_large", large); err != nil || code != 200 {
		t.Errorf("large delivery after the senders left: %d %s %v", code, text, err)
	}
	if got := e.Rows(); got != [3]int{2, 2, 2} {
		t.Errorf("receipts, attempts, usage rows = %v, want 2 of each", got)
	}
	await.Eventually(t, hangGuard, "every body's budget is given back", func() bool {
		return e.Server.Budget.Reading() == 0 && e.Server.Budget.Held() == 0
	})
	if !e.Server.Budget.TryHold(budget) {
		t.Error("the whole budget is not free after the requests")
	}
}

// A body's buffer grows as its bytes arrive, never past the declared length
// and never to more than twice what has arrived (4 KiB at the least), and
// each growth is charged before it is allocated.
func TestReadArrivingGrowsWithArrivals(t *testing.T) {
	body := bytes.Repeat([]byte("a"), 100_000)
	for _, tc := range []struct {
		name        string
		n, limit    int64
		in          []byte
		wantGrowths []int64
	}{
		{"declared", 100_000, 256 << 10, body, []int64{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 100_000}},
		{"unknown length", -1, 256 << 10, body, []int64{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10}},
		{"small declared: one exact buffer", 5000, 256 << 10, body[:5000], []int64{5000}},
		{"one byte of a large declared body", 256 << 10, 256 << 10, body[:1], []int64{4 << 10}},
		{"empty", 0, 256 << 10, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var growths []int64
			got, err := receiver.ReadArriving(iotest.OneByteReader(bytes.NewReader(tc.in)), tc.n, tc.limit, func(c int64) error {
				growths = append(growths, c)
				return nil
			})
			if err != nil || !bytes.Equal(got, tc.in) {
				t.Fatalf("read %d bytes, err %v; want the %d sent", len(got), err, len(tc.in))
			}
			if !slices.Equal(growths, tc.wantGrowths) {
				t.Errorf("buffer grew to %v, want %v", growths, tc.wantGrowths)
			}
		})
	}

	t.Run("unknown length past the limit", func(t *testing.T) {
		_, err := receiver.ReadArriving(bytes.NewReader(body), -1, 50_000, func(int64) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "too large") {
			t.Errorf("a body past the limit: %v, want it refused as too large", err)
		}
	})
	t.Run("a growth refused ends the read", func(t *testing.T) {
		refused := errors.New("refused")
		var arrived int64
		r := iotest.OneByteReader(io.TeeReader(bytes.NewReader(body), writerFunc(func(p []byte) { arrived += int64(len(p)) })))
		_, err := receiver.ReadArriving(r, int64(len(body)), 256<<10, func(c int64) error {
			if c > 16<<10 {
				return refused
			}
			return nil
		})
		if !errors.Is(err, refused) || arrived != 16<<10+1 {
			t.Errorf("err %v after %d bytes; want the refusal after 16 KiB and the byte that needed room", err, arrived)
		}
	})
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// With the body budget taken (as by stalled senders), a body over 16 KiB
// waits for room until the body deadline and then gets 503 with Retry-After;
// a normal small delivery is served at once all the same.
func TestBodyBudget(t *testing.T) {
	e := newEnv(t)
	e.Server.Budget = receiver.NewBodyBudget(64 << 10)
	e.Server.BodyTimeout = 300 * time.Millisecond
	addr := e.listen(receiver.ListenOptions{})
	// What stalled senders would hold: all but 4 KiB of the budget.
	if err := e.Server.Budget.Hold(context.Background(), 60<<10); err != nil {
		t.Fatal(err)
	}
	held := true
	defer func() {
		if held {
			e.Server.Budget.Give(60 << 10)
		}
	}()

	pad := strings.Repeat("x", 30<<10)
	large := []byte(`{"type":"usage.recorded","pad":"` + pad + `","data":{"customer":"cus_big","meter":"api","quantity":1,"occurred_at":"2026-11-29T10:00:00Z"}}`)
	c := dialRaw(t, addr)
	c.write(e.delivery("evt_large", large, "length"))
	resp, text := c.response()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !resp.Close {
		t.Errorf("large body with the budget taken: %d (Retry-After %q, close %v) %s", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close, text)
	}
	if !c.closedByServer() {
		t.Error("connection left open")
	}
	if e.stored("evt_large") || e.Attempts() != 0 {
		t.Error("a delivery refused for the budget was written")
	}

	c = dialRaw(t, addr)
	c.write(e.delivery("evt_small", testenv.UsageBody("cus_small", "api", "1"), "length"))
	if resp, text := c.response(); resp.StatusCode != 200 {
		t.Errorf("small delivery with the budget taken: %d %s", resp.StatusCode, text)
	}
	e.Server.Budget.Give(60 << 10)
	held = false
	c = dialRaw(t, addr)
	c.write(e.delivery("evt_large", large, "length"))
	if resp, text := c.response(); resp.StatusCode != 200 {
		t.Errorf("large body with room: %d %s", resp.StatusCode, text)
	}
	if !e.stored("evt_small") || !e.stored("evt_large") {
		t.Error("the accepted deliveries are not stored")
	}
	// Every share was given back: the whole budget is free again.
	if !e.Server.Budget.TryHold(64 << 10) {
		t.Error("budget not fully released after the requests")
	}
}
