package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/schema"
)

func usageLine(id string, created time.Time, customer string, qty int) string {
	return fmt.Sprintf(`{"id":%q,"type":"usage.recorded","created":%q,"data":{"customer":%q,"meter":"api_requests","quantity":%d}}`,
		id, created.Format(time.RFC3339), customer, qty)
}

func TestFileSourceInsertsMissingEventsPageByPage(t *testing.T) {
	e := newEnv(t, envOptions{})
	var lines []string
	for i := 0; i < 10; i++ {
		lines = append(lines, usageLine(fmt.Sprintf("msg_%d", i), testNow.Add(-time.Duration(10-i)*time.Hour), "cus_1", i+1))
		if i == 4 {
			lines = append(lines, "", "   ") // blank lines are skipped
		}
	}
	lines = append(lines, usageLine("msg_old", testNow.Add(-100*time.Hour), "cus_1", 1000)) // outside the window
	e.writeFile("events.jsonl", strings.Join(lines, "\n")+"\n")
	// msg_0..msg_3 reached the receiver by webhook.
	for i := 0; i < 4; i++ {
		body := []byte(lines[i])
		if code, _ := e.post("files", fmt.Sprintf("msg_%d", i), "", body); code != 200 {
			t.Fatalf("webhook %d: %d", i, code)
		}
	}
	r := e.reconciler("files")
	r.Source.(*FileSource).PageSize = 3
	rep, err := r.Run(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Seen != 10 || rep.AlreadyPresent != 4 || rep.Inserted != 6 || rep.Failed != 0 || rep.Pages != 4 {
		t.Fatalf("report %+v", rep)
	}
	// 1+…+10 = 55 requests, each exactly once.
	if got := e.usageSum("files").String(); got != "55" {
		t.Errorf("usage total %s, want 55", got)
	}
	if n := e.CountAttempts(func(a schema.Attempt) bool { return a.RemoteAddr == "reconcile:file:events.jsonl" }); n != 6 {
		t.Errorf("file attempts = %d", n)
	}
	rep, err = r.Run(context.Background(), Options{Since: 24 * time.Hour})
	if err != nil || rep.Inserted != 0 || rep.AlreadyPresent != 10 {
		t.Errorf("second run err %v %+v", err, rep)
	}
}

func TestFileSourceBadLineStopsAtItsPage(t *testing.T) {
	e := newEnv(t, envOptions{})
	lines := []string{
		usageLine("msg_a", testNow.Add(-3*time.Hour), "cus_1", 1),
		usageLine("msg_b", testNow.Add(-2*time.Hour), "cus_1", 2),
		`{"id":"msg_c","type":"usage.recorded","data":{}}`, // no time
		usageLine("msg_d", testNow.Add(-time.Hour), "cus_1", 4),
	}
	path := e.writeFile("events.jsonl", strings.Join(lines, "\n"))
	r := e.reconciler("files")
	r.Source.(*FileSource).PageSize = 2
	rep, err := r.Run(context.Background(), Options{})
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), path+":3: no event time") {
		t.Fatalf("err %v", err)
	}
	if rep.Inserted != 2 || rep.Pages != 1 {
		t.Errorf("report %+v", rep)
	}
	cp := e.checkpoint("files")
	if cp.Cursor == "" || cp.CompletedThrough != 0 {
		t.Errorf("checkpoint %+v", cp)
	}
	// Fixed file: the run resumes after page 1 (the line offset still holds).
	lines[2] = usageLine("msg_c", testNow.Add(-90*time.Minute), "cus_1", 3)
	e.writeFile("events.jsonl", strings.Join(lines, "\n"))
	rep, err = r.Run(context.Background(), Options{})
	if err != nil || !rep.Resumed || rep.Seen != 2 || rep.Inserted != 2 {
		t.Fatalf("err %v report %+v", err, rep)
	}
	if got := e.usageSum("files").String(); got != "10" {
		t.Errorf("usage total %s, want 10", got)
	}
}

// A line is read as the webhook path reads a body: the last of duplicate keys wins, so a
// reconciled event gets the receipt key its webhook got, and an id that is not clean text fails
// its page instead of becoming a key.
func TestFileSourceReadsLinesAsWebhooksAre(t *testing.T) {
	e := newEnv(t, envOptions{})
	line := `{"id":"msg_first","type":"usage.recorded","created":"2026-01-01T00:00:00Z","id":"msg_last",` +
		`"created":` + fmt.Sprint(testNow.Add(-time.Hour).Unix()) + `,"data":{"customer":"cus_1","meter":"api_requests","quantity":2}}`
	e.writeFile("events.jsonl", line+"\n")
	rep, err := e.reconciler("files").Run(context.Background(), Options{})
	if err != nil || rep.Inserted != 1 {
		t.Fatalf("err %v, report %+v", err, rep)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE event_id = 'msg_last'`); n != 1 {
		t.Errorf("%d receipts under the last id, want 1", n)
	}

	e.writeFile("events.jsonl", strings.Replace(usageLine("msg_bad", testNow.Add(-time.Hour), "cus_1", 1), "msg_bad", `msg_\u0000`, 1)+"\n")
	rep, err = e.reconciler("files").Run(context.Background(), Options{Since: 24 * time.Hour})
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "event id: contains a control character (U+0000)") {
		t.Fatalf("err %v, want the bad id named", err)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts`); n != 1 || rep.Inserted != 0 {
		t.Errorf("%d receipts, %d inserted; want the bad event left out", n, rep.Inserted)
	}
}

func TestFileSourceRejects(t *testing.T) {
	w := Window{From: testNow.Add(-time.Hour), To: testNow}
	for name, tc := range map[string]struct{ content, want string }{
		"not JSON":     {"{nope\n", ":1: not valid JSON"},
		"no id":        {`{"type":"x","created":1}` + "\n", ":1: no event id"},
		"numeric id":   {`{"id":5,"created":1}` + "\n", ":1: no event id"},
		"bad time":     {"\n" + `{"id":"a","created":"yesterday"}`, `:2: created: "yesterday" is not an RFC 3339 time`},
		"too deep":     {`{"id":"a","created":1,"x":` + strings.Repeat("[", 128) + strings.Repeat("]", 128) + "}\n", ":1: nests deeper than 128 levels"},
		"missing file": {"", "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			path := t.TempDir() + "/e.jsonl"
			if tc.content != "" {
				if err := writeFile(path, tc.content); err != nil {
					t.Fatal(err)
				}
			}
			_, err := (&FileSource{Path: path}).List(context.Background(), w, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := (&FileSource{Path: "x"}).List(context.Background(), w, "12"); err == nil || !strings.Contains(err.Error(), "bad cursor") {
		t.Errorf("bad cursor: %v", err)
	}
}
