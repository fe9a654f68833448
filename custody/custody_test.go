package custody_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

func TestDeliveryIsStoredWithItsUsage(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		body := testenv.UsageBody("cus_1", "api_requests", "3")
		r := e.Send("msg_1", body)
		if r.Code != 200 || !r.Body.Accepted || r.Body.Duplicate || r.Body.Status != custody.StatusApplied {
			t.Fatalf("got %d %+v", r.Code, r.Body)
		}
		var rc struct {
			Body       []byte         `db:"body"`
			Sum        []byte         `db:"body_sha256"`
			Headers    string         `db:"signature_headers"`
			Status     custody.Status `db:"status"`
			Type       string         `db:"event_type"`
			Version    string         `db:"handler_version"`
			Source     custody.Source `db:"source"`
			ReceivedAt int64          `db:"received_at"`
		}
		if err := e.DB.Read.Get(&rc, `SELECT body, body_sha256, signature_headers, status, event_type, handler_version, source, received_at
			FROM receipts WHERE provider = 'default' AND event_id = 'msg_1'`); err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(body)
		if !bytes.Equal(rc.Body, body) || !bytes.Equal(rc.Sum, want[:]) {
			t.Errorf("stored body or digest differs from the bytes sent")
		}
		if rc.Status != custody.StatusApplied || rc.Type != "usage.recorded" || rc.Version != "test" || rc.Source != custody.SourceWebhook ||
			rc.ReceivedAt != e.Now().UnixMilli() {
			t.Errorf("receipt = %+v", rc)
		}
		if !strings.Contains(rc.Headers, "Webhook-Signature: v1,") || !strings.Contains(rc.Headers, "Webhook-Id: msg_1") {
			t.Errorf("signature headers not kept: %q", rc.Headers)
		}
		var rec schema.LedgerRow
		if err := e.DB.Read.Get(&rec, `SELECT * FROM metered_usage`); err != nil {
			t.Fatal(err)
		}
		// The row's key is its receipt's id, which grows in order (0015).
		var receiptID int64
		if err := e.DB.Read.Get(&receiptID, `SELECT id FROM receipts WHERE provider = 'default' AND event_id = 'msg_1'`); err != nil {
			t.Fatal(err)
		}
		if rec.ReceiptID != receiptID || receiptID == 0 {
			t.Errorf("usage row's receipt_id %d, want its receipt's id %d", rec.ReceiptID, receiptID)
		}
		u := ledger.StoredRow(&rec)
		if u.Customer != "cus_1" || u.Meter != "api_requests" || !u.Quantity.Equal(ledger.TotalOf(3*ledger.Scale)) || rec.Decimals != 6 || u.EventID != "msg_1" ||
			u.OccurredAt != time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).UnixMilli() || u.Kind != ledger.KindUsage {
			t.Errorf("usage row = %+v", u)
		}
		if !bytes.Equal(u.RowHash, u.Hash(ledger.GenesisHash)) {
			t.Errorf("row hash does not chain from genesis")
		}
		as := e.AllAttempts()
		if len(as) != 1 {
			t.Fatalf("%d attempts, want 1", len(as))
		}
		if a := as[0]; a.Outcome != string(custody.OutcomeInserted) || a.SignatureAgeMS == nil || *a.SignatureAgeMS != 0 {
			t.Errorf("attempt outcome %q age %v", a.Outcome, a.SignatureAgeMS)
		}
	})
}

func TestSameEventFiftyTimesConcurrently(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		body := testenv.UsageBody("cus_1", "api_requests", "2.5")
		h := e.SignDefault("msg_same", body)
		var wg sync.WaitGroup
		results := make([]testenv.Response, 50)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = e.PostReply("default", h, body)
			}()
		}
		wg.Wait()
		fresh := 0
		for _, r := range results {
			if r.Code != 200 || !r.Body.Accepted {
				t.Fatalf("got %d %+v", r.Code, r.Body)
			}
			if !r.Body.Duplicate {
				fresh++
			}
		}
		if fresh != 1 {
			t.Errorf("%d responses said not duplicate, want 1", fresh)
		}
		if got := e.Rows(); got != [3]int{1, 50, 1} {
			t.Errorf("receipts, attempts, usage = %v, want [1 50 1]", got)
		}
		if got := e.Totals()["cus_1"]; got != 2_500_000 {
			t.Errorf("total = %s, want 2.5", got)
		}
		dups := 0
		for _, a := range e.EventAttempts("default", "msg_same") {
			if a.Outcome == string(custody.OutcomeDuplicate) {
				dups++
			}
		}
		if dups != 49 {
			t.Errorf("%d duplicate attempts, want 49", dups)
		}
	})
}

func TestDistinctEventsWithDuplicatesFromManySenders(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		rng := rand.New(rand.NewSource(7))
		type delivery struct {
			id   string
			body []byte
		}
		want := map[string]ledger.Quantity{}
		var all []delivery
		for i := range 1000 {
			customer := fmt.Sprintf("cus_%d", rng.Intn(17))
			q := ledger.Quantity(rng.Int63n(5_000_000) + 1) // up to 5 units, micro precision
			want[customer] += q
			d := delivery{fmt.Sprintf("msg_%04d", i), testenv.UsageBody(customer, "api_requests", q.String())}
			all = append(all, d)
			if i%5 == 0 { // 20% duplicates
				all = append(all, d)
			}
		}
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })

		work := make(chan delivery)
		var wg sync.WaitGroup
		var failed sync.Map
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for d := range work {
					if r := e.Send(d.id, d.body); r.Code != 200 {
						failed.Store(d.id, r.Code)
					}
				}
			}()
		}
		for _, d := range all {
			work <- d
		}
		close(work)
		wg.Wait()
		failed.Range(func(k, v any) bool { t.Errorf("%v got %v", k, v); return true })

		if got := e.Rows(); got != [3]int{1000, 1200, 1000} {
			t.Errorf("receipts, attempts, usage = %v, want [1000 1200 1000]", got)
		}
		got := e.Totals()
		if len(got) != len(want) {
			t.Errorf("%d customers, want %d", len(got), len(want))
		}
		for c, q := range want {
			if got[c] != q {
				t.Errorf("%s total = %s, want %s", c, got[c], q)
			}
		}
	})
}

func TestFailureBeforeCommitStoresNothingAndRetryAppliesOnce(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		fail := true
		e.Writer.SetTestHook(func(d *custody.Delivery) error {
			if fail {
				fail = false
				return errors.New("injected: disk on fire")
			}
			return nil
		})
		body := testenv.UsageBody("cus_1", "api_requests", "4")
		r := e.Send("msg_retry", body)
		if r.Code != http.StatusServiceUnavailable || r.Body.Accepted {
			t.Fatalf("got %d %+v, want 503", r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{0, 0, 0} {
			t.Fatalf("after a failed attempt: receipts, attempts, usage = %v, want nothing", got)
		}
		if r := e.Send("msg_retry", body); r.Code != 200 || r.Body.Duplicate {
			t.Fatalf("retry: got %d %+v", r.Code, r.Body)
		}
		if r := e.Send("msg_retry", body); r.Code != 200 || !r.Body.Duplicate {
			t.Fatalf("second retry: got %d %+v", r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{1, 2, 1} {
			t.Errorf("receipts, attempts, usage = %v, want [1 2 1]", got)
		}
		if got := e.Totals()["cus_1"]; got != 4*ledger.Scale {
			t.Errorf("total = %s, want 4", got)
		}
	})
}

func TestOneFailingItemDoesNotSinkItsBatch(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		sixInOneBatch(t, e, func(d *custody.Delivery) error {
			if d.EventID == "msg_3" {
				return errors.New("injected")
			}
			return nil
		})
	})
}

// sixInOneBatch sends msg_0 to msg_5 and holds the writer on msg_0 until the
// other five are queued, so that they make one batch; inject runs on each
// delivery as the writer applies it. It asserts that msg_3 alone failed: 503
// for it, 200 and one receipt, attempt and usage row for each of the
// others, on an unbroken chain. The batch of five runs twice
// (optimistically, then with a savepoint per item).
func sixInOneBatch(t *testing.T, e *env, inject func(*custody.Delivery) error) {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	e.Writer.SetTestHook(func(d *custody.Delivery) error {
		if d.EventID == "msg_0" { // alone in its batch, applied once
			close(entered)
			<-release
		}
		return inject(d)
	})
	releaseWriter := sync.OnceFunc(func() { close(release) })
	defer releaseWriter() // a failed wait below must not leave the writer held
	// One channel per sender: goSend always delivers exactly one code, so a
	// sender that fails makes the test fail instead of hang.
	codes := make([]chan int, 6)
	for i := range codes {
		codes[i] = make(chan int, 1)
		goSend(e, fmt.Sprintf("msg_%d", i), testenv.UsageBody("cus_1", "m", "1"), codes[i])
		if i == 0 {
			awaitSignal(t, "msg_0 holds the writer", entered, codes[0])
		}
	}
	await.Eventually(t, 5*time.Second, "the other five deliveries are queued", func() bool { return e.Writer.Depth() >= 5 })
	releaseWriter()
	for i, ch := range codes {
		if want, c := map[bool]int{true: 503, false: 200}[i == 3], recvCode(t, ch); c != want {
			t.Errorf("msg_%d: %d, want %d", i, c, want)
		}
	}
	if got := e.Rows(); got != [3]int{5, 5, 5} {
		t.Errorf("receipts, attempts, usage = %v, want [5 5 5]", got)
	}
	rep, err := invoice.Verify(context.Background(), e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.First(); p != nil {
		t.Errorf("verify: %+v", *p)
	}
}

func TestFullQueueAnswers503WithRetryAfter(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		e.Writer.Close()
		w := custody.NewWriter(e.DB)
		w.QueueSize = 1
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		w.SetTestHook(func(*custody.Delivery) error { once.Do(func() { close(entered) }); <-release; return nil })
		if err := w.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.Writer, e.Server.Custody = w, w
		releaseWriter := sync.OnceFunc(func() { close(release) })
		defer releaseWriter()

		// msg_a's and msg_b's codes (see goSend).
		held := make(chan int, 2)
		goSend(e, "msg_a", testenv.UsageBody("cus_1", "m", "1"), held) // held in the writer
		awaitSignal(t, "msg_a holds the writer", entered, held)
		goSend(e, "msg_b", testenv.UsageBody("cus_1", "m", "1"), held) // fills the queue
		await.Eventually(t, 5*time.Second, "msg_b fills the queue", func() bool { return w.Depth() == 1 })
		body := testenv.UsageBody("cus_1", "m", "1")
		req, _ := http.NewRequest(http.MethodPost, e.HTTP.URL+"/webhooks/default", bytes.NewReader(body))
		for k, v := range e.SignDefault("msg_c", body) {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("got %d Retry-After=%q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}

		// Let the writer go: msg_a and msg_b commit, msg_c was never queued.
		releaseWriter()
		await.Eventually(t, 5*time.Second, "the writer queue drains", func() bool { return w.Depth() == 0 })
		for range 2 {
			if c := recvCode(t, held); c != http.StatusOK {
				t.Errorf("held delivery: %d, want 200 once the writer is released", c)
			}
		}
		var rejected int
		if err := e.DB.Read.Get(&rejected, `SELECT COUNT(*) FROM receipts WHERE provider = 'default' AND event_id = 'msg_c'`); err != nil {
			t.Fatal(err)
		}
		if rejected != 0 {
			t.Errorf("%d receipts for msg_c, want 0: a 503 for a full queue stores nothing", rejected)
		}
		if got := e.Rows(); got != [3]int{2, 2, 2} {
			t.Errorf("receipts, attempts, usage = %v, want [2 2 2] (msg_a, msg_b)", got)
		}
		// The sender's retry is a new event, not a duplicate of anything.
		if r := e.Send("msg_c", body); r.Code != http.StatusOK || !r.Body.Accepted || r.Body.Duplicate || r.Body.Status != custody.StatusApplied {
			t.Errorf("retry of msg_c: %d %+v, want 200 accepted, not duplicate, applied", r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{3, 3, 3} {
			t.Errorf("after the retry: receipts, attempts, usage = %v, want [3 3 3]", got)
		}
		if got := e.Totals()["cus_1"]; got != 3*ledger.Scale {
			t.Errorf("total %s, want 3 (msg_a, msg_b, msg_c once each)", got)
		}
	})
}

func TestMappingOutcomes(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		var logs bytes.Buffer                                                                             // one JSON delivery line per request; the handler logs before it replies
		e.Server.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})) // each delivery's line is at debug
		cases := []struct {
			name, body string
			status     custody.Status
			errPart    string
		}{
			{"negative quantity", `{"type":"usage.recorded","data":{"customer":"c","meter":"m","quantity":-1}}`, custody.StatusFailed, "negative"},
			{"text quantity", `{"type":"usage.recorded","data":{"customer":"c","meter":"m","quantity":"lots"}}`, custody.StatusFailed, "not a decimal"},
			{"too precise", `{"type":"usage.recorded","data":{"customer":"c","meter":"m","quantity":0.0000001}}`, custody.StatusFailed, "6 decimal places"},
			{"missing customer", `{"type":"usage.recorded","data":{"meter":"m","quantity":1}}`, custody.StatusFailed, "customer"},
			{"bad time", `{"type":"usage.recorded","data":{"customer":"c","meter":"m","quantity":1,"occurred_at":"yesterday"}}`, custody.StatusFailed, "RFC 3339"},
			{"unmapped type", `{"type":"invoice.paid","data":{}}`, custody.StatusIgnored, ""},
			{"empty object", `{}`, custody.StatusIgnored, ""},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				id := fmt.Sprintf("msg_map_%d", i)
				r := e.Send(id, []byte(c.body))
				if r.Code != 200 || r.Body.Status != c.status {
					t.Fatalf("got %d %+v, want 200 %s", r.Code, r.Body, c.status)
				}
				var status custody.Status
				var msg string
				if err := e.DB.Read.QueryRow(`SELECT status, error FROM receipts WHERE event_id = ?`, id).Scan(&status, &msg); err != nil {
					t.Fatal(err)
				}
				if status != c.status || !strings.Contains(msg, c.errPart) {
					t.Errorf("receipt status %q error %q, want %q containing %q", status, msg, c.status, c.errPart)
				}
				// Contains(msg, "") always holds: an ignored event must carry no error at all.
				if c.status == custody.StatusIgnored && msg != "" {
					t.Errorf("ignored receipt has error %q, want \"\"", msg)
				}
				// The sender and the operator learn why: the 2xx body and the
				// delivery log line carry the stored mapping error.
				if r.Body.Error != msg {
					t.Errorf("reply error %q, want the receipt's %q", r.Body.Error, msg)
				}
				var line struct {
					EventID      string `json:"event_id"`
					MappingError string `json:"mapping_error"`
				}
				lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
				if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil || line.EventID != id || line.MappingError != msg {
					t.Errorf("delivery log line %s: mapping_error %q, want %q (%v)", lines[len(lines)-1], line.MappingError, msg, err)
				}
			})
		}
		if n := e.Count("metered_usage"); n != 0 {
			t.Errorf("%d usage rows, want 0", n)
		}
		if n := e.Count("receipts"); n != len(cases) {
			t.Errorf("%d receipts, want %d: every authenticated event is kept", n, len(cases))
		}
	})
}

func TestSameIDDifferentBodyIsAPayloadMismatch(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		e.Send("msg_x", testenv.UsageBody("cus_1", "m", "1"))
		r := e.Send("msg_x", testenv.UsageBody("cus_1", "m", "1000"))
		if r.Code != 200 || !r.Body.Duplicate {
			t.Fatalf("got %d %+v", r.Code, r.Body)
		}
		as := e.EventAttempts("default", "msg_x")
		if len(as) != 2 || as[0].Outcome != string(custody.OutcomeInserted) || as[1].Outcome != string(custody.OutcomePayloadMismatch) {
			t.Errorf("attempts %+v, want inserted then payload_mismatch", as)
		}
		if got := e.Totals()["cus_1"]; got != ledger.Scale {
			t.Errorf("total = %s, want 1: the mismatching body must add nothing", got)
		}
	})
}

func TestAcknowledgedEventsSurviveRestart(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		for i := range 20 {
			if r := e.Send(fmt.Sprintf("msg_%d", i), testenv.UsageBody("cus_1", "m", "1")); r.Code != 200 {
				t.Fatalf("%d: %d", i, r.Code)
			}
		}
		e.Reopen()
		if got := e.Rows(); got != [3]int{20, 20, 20} {
			t.Errorf("after reopen: %v, want [20 20 20]", got)
		}
		if r := e.Send("msg_3", testenv.UsageBody("cus_1", "m", "1")); !r.Body.Duplicate {
			t.Errorf("redelivery after restart was not a duplicate")
		}
		if got := e.Totals()["cus_1"]; got != 20*ledger.Scale {
			t.Errorf("total %s, want 20", got)
		}
	})
}

func TestLedgerIsAppendOnly(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		e.Send("msg_1", testenv.UsageBody("cus_1", "m", "1"))
		stmts := []string{`UPDATE metered_usage SET quantity = 0`, `DELETE FROM metered_usage`}
		if backend == "postgres" {
			stmts = append(stmts, `TRUNCATE metered_usage CASCADE`) // row triggers do not see TRUNCATE
		}
		for _, stmt := range stmts {
			_, err := e.DB.Write.Exec(stmt)
			if err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("%s: err = %v, want append-only refusal", stmt, err)
			}
		}
		if got := e.Totals()["cus_1"]; got != ledger.Scale {
			t.Errorf("total %s, want 1", got)
		}
	})
}

// A full database (SQLite's own SQLITE_FULL, as a full disk gives) is a
// storage error: the delivery gets 503, nothing of it is stored, the writer
// reports it through OnStorageError, and once there is room again the
// sender's retry is applied once.
func TestFullDatabaseIsAStorageError(t *testing.T) {
	var mu sync.Mutex
	var ops []string
	var errs []error
	e := newEnvWithWriter(t, "sqlite", func(w *custody.Writer) {
		w.OnStorageError = func(op string, err error) {
			mu.Lock()
			defer mu.Unlock()
			ops, errs = append(ops, op), append(errs, err)
		}
	})
	if r := e.Send("msg_ok", testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
		t.Fatalf("before the disk fills: %d %+v", r.Code, r.Body)
	}
	// Cap the database at its current size: the next page it needs fails
	// with SQLITE_FULL. The write handle has one connection, so the pragma
	// stays on the writer's connection.
	var pages int
	if err := e.DB.Write.Get(&pages, `PRAGMA page_count`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Write.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	big := []byte(fmt.Sprintf(`{"type":"usage.recorded","data":{"customer":"cus_2","meter":"api_requests","quantity":2,"occurred_at":"2026-11-29T10:00:00Z","pad":%q}}`,
		strings.Repeat("x", 100_000)))
	r := e.Send("msg_full", big)
	if r.Code != http.StatusServiceUnavailable {
		t.Fatalf("with the database full: %d %+v; want 503", r.Code, r.Body)
	}
	mu.Lock()
	gotOps, gotErrs := slices.Clone(ops), slices.Clone(errs)
	mu.Unlock()
	if len(gotOps) == 0 || !strings.Contains(gotErrs[0].Error(), "full") {
		t.Fatalf("storage errors reported: %v %v; want the SQLITE_FULL failure (reply %+v)", gotOps, gotErrs, r)
	}
	if gotOps[0] != "delivery" && gotOps[0] != "commit" {
		t.Errorf("op %q; want delivery or commit", gotOps[0])
	}
	if got := e.Rows(); got != [3]int{1, 1, 1} {
		t.Fatalf("receipts, attempts, usage with the database full = %v; want only msg_ok's [1 1 1]", got)
	}

	if _, err := e.DB.Write.Exec(`PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if r := e.Send("msg_full", big); r.Code != 200 || r.Body.Duplicate {
		t.Fatalf("retry once there is room: %d %+v; want 200, not a duplicate", r.Code, r.Body)
	}
	if got := e.Rows(); got != [3]int{2, 2, 2} {
		t.Errorf("receipts, attempts, usage after the retry = %v; want [2 2 2]", got)
	}
}

// While Admit refuses (serve's WAL bound while Litestream cannot capture the
// WAL), every delivery gets 503 and nothing of it is written, reported as a
// storage error; once Admit lets commits through, the sender's retry is
// applied once.
func TestAdmitRefusalWritesNothing(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		var mu sync.Mutex
		var refuse error
		var ops []string
		e := newEnvWithWriter(t, backend, func(w *custody.Writer) {
			w.Admit = func() error {
				mu.Lock()
				defer mu.Unlock()
				return refuse
			}
			w.OnStorageError = func(op string, err error) {
				mu.Lock()
				defer mu.Unlock()
				ops = append(ops, op)
			}
		})
		if r := e.Send("msg_ok", testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("before: %d %+v", r.Code, r.Body)
		}
		mu.Lock()
		refuse = errors.New("injected: the WAL is full")
		mu.Unlock()
		body := testenv.UsageBody("cus_1", "api_requests", "5")
		if r := e.Send("msg_held", body); r.Code != http.StatusServiceUnavailable {
			t.Fatalf("while Admit refuses: %d %+v; want 503", r.Code, r.Body)
		}
		if r := e.Send("msg_ok", testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != http.StatusServiceUnavailable {
			t.Fatalf("a duplicate while Admit refuses: %d %+v; want 503 (its attempt row is a write too)", r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{1, 1, 1} {
			t.Fatalf("receipts, attempts, usage while Admit refuses = %v; want only msg_ok's [1 1 1]", got)
		}
		mu.Lock()
		refuse = nil
		gotOps := slices.Clone(ops)
		mu.Unlock()
		if len(gotOps) != 2 || gotOps[0] != "admit" {
			t.Errorf("storage errors reported: %v; want two admit", gotOps)
		}
		if r := e.Send("msg_held", body); r.Code != 200 || r.Body.Duplicate {
			t.Fatalf("retry once admitted: %d %+v; want 200, not a duplicate", r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{2, 2, 2} {
			t.Errorf("receipts, attempts, usage after the retry = %v; want [2 2 2]", got)
		}
		if got := e.Totals()["cus_1"]; got != 6*ledger.Scale {
			t.Errorf("total = %s, want 6", got)
		}
	})
}

// A new event's attempt is kept in its receipt (no delivery_attempts row);
// each redelivery is a row of its own; the dispute trace's reader shows them
// all, the first first.
func TestFirstAttemptIsKeptInItsReceipt(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		body := testenv.UsageBody("cus_1", "api_requests", "1")
		h := e.SignDefault("msg_first", body)
		h.Set("User-Agent", "first/1.0")
		if r := e.PostReply("default", h, body); r.Code != 200 || r.Body.Duplicate {
			t.Fatalf("got %d %+v", r.Code, r.Body)
		}
		if n := e.Count("delivery_attempts"); n != 0 {
			t.Errorf("a new event wrote %d delivery_attempts rows, want 0", n)
		}
		h.Set("User-Agent", "again/1.0")
		if r := e.PostReply("default", h, body); r.Code != 200 || !r.Body.Duplicate {
			t.Fatalf("redelivery: %d %+v", r.Code, r.Body)
		}
		if n := e.Count("delivery_attempts"); n != 1 {
			t.Errorf("a redelivery wrote %d delivery_attempts rows, want 1", n)
		}
		as := e.EventAttempts("default", "msg_first")
		if len(as) != 2 || as[0].ID != 0 || as[0].Outcome != string(custody.OutcomeInserted) || as[0].UserAgent != "first/1.0" ||
			as[0].StatusCode != http.StatusOK || as[0].SignatureAgeMS == nil || as[0].SignatureHeaders == "" ||
			as[1].ID == 0 || as[1].Outcome != string(custody.OutcomeDuplicate) || as[1].UserAgent != "again/1.0" {
			t.Errorf("attempts %+v", as)
		}
		if !bytes.Equal(as[0].BodySHA256, as[1].BodySHA256) || as[0].ReceivedAt > as[1].ReceivedAt {
			t.Errorf("attempts %+v: same body, first before redelivery", as)
		}
	})
}

// A usage row is keyed by the receipt that applied it (migration 0015): the
// receipt's id grows in order, so the row's key lands at the right edge of
// its index, and only the receipt's (provider, event_id) is probed at a
// random place. The key still refuses a second row for the receipt and
// meter, and no index over usage rows is keyed by the event id.
func TestUsageRowsAreKeyedByTheirReceipt(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		for _, id := range []string{"evt_b", "evt_a"} {
			if r := e.Send(id, testenv.UsageBody("cus_1", "api_requests", "2")); r.Code != 200 {
				t.Fatalf("%s: %d", id, r.Code)
			}
		}
		var rows []struct {
			Receipt int64  `db:"receipt_id"`
			Event   string `db:"event_id"`
			Stored  int64  `db:"stored"`
		}
		if err := e.DB.Read.Select(&rows, `SELECT u.receipt_id, u.event_id, r.id AS stored FROM metered_usage u
			JOIN receipts r ON r.provider = u.provider AND r.event_id = u.event_id ORDER BY u.id`); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].Receipt != rows[0].Stored || rows[1].Receipt != rows[1].Stored || rows[0].Receipt >= rows[1].Receipt {
			t.Fatalf("usage rows' receipts: %+v, want each its receipt's id, in order", rows)
		}

		// The second line of defence: the same receipt and meter again.
		_, err := e.DB.Write.Exec(`INSERT INTO metered_usage (id, kind, provider, event_id, customer_id, meter, quantity, occurred_at,
			recorded_at, prev_hash, row_hash, receipt_id) VALUES (1000, 'usage', 'other', 'evt_other', 'cus_1', 'api_requests', 1, 0, 0, '', '', ?)`,
			rows[0].Receipt)
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), "unique") {
			t.Fatalf("a second row for receipt %d and meter api_requests: err = %v, want a unique violation", rows[0].Receipt, err)
		}

		// Every index on metered_usage that covers usage rows is keyed
		// without the event id.
		var indexes []struct {
			Name string `db:"name"`
			Def  string `db:"def"`
		}
		query := `SELECT name, COALESCE(sql, '') AS def FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'metered_usage'`
		if backend == "postgres" {
			query = `SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename = 'metered_usage' AND schemaname = current_schema()`
		}
		if err := e.DB.Read.Select(&indexes, query); err != nil {
			t.Fatal(err)
		}
		for _, ix := range indexes {
			if ix.Def == "" {
				t.Errorf("index %s is a table constraint's (a UNIQUE on the table covers every row)", ix.Name)
			}
			if strings.Contains(ix.Def, "event_id") && !strings.Contains(strings.NewReplacer("(", "", ")", "").Replace(ix.Def), "WHERE receipt_id IS NULL") {
				t.Errorf("index %s takes every usage row by its event id: %s", ix.Name, ix.Def)
			}
		}
	})
}
