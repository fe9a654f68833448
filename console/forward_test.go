package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
)

// With a destination, the overview shows its backlog (forward.Status) and
// the event page each message with its attempts (forward.List, Attempts).
func TestForwardingViews(t *testing.T) {
	var up atomic.Bool
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "<b>busy</b>")
			return
		}
		io.WriteString(w, "ok")
	}))
	defer app.Close()
	d := config.Destination{Name: "app", URL: app.URL, MaxAttempts: 50, Concurrency: 1,
		Secrets: []config.Secret{{Value: "whsec_" + strings.Repeat("QUJD", 8)}}}
	d.Timeout.Duration, d.MaxAge.Duration = time.Second, time.Hour
	d.Backoff.Duration, d.MaxBackoff.Duration = 20*time.Millisecond, 50*time.Millisecond
	e := newEnv(t, false, func(o *testenv.Options) {
		o.RealTime = true // the relay's clock: max_age counts from the real pending time
		o.Edits = append(o.Edits, func(c *config.Config) { c.Destinations = []config.Destination{d} })
	})
	e.Console.Destinations = []string{"app"}
	relay := &forward.Relay{DB: e.DB, Writer: e.Writer, Destinations: []config.Destination{d}, Log: slog.New(slog.DiscardHandler),
		Poll: 20 * time.Millisecond, Sole: true}
	if err := relay.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)
	e.send(t, "evt_1", "cus_1", "1")
	e.signIn(t)
	msg := custody.MessageID("default", "evt_1", "app")
	// The forwarding section alone: elsewhere on the page a digest's hex
	// can hold "503" before any attempt.
	await.Eventually(t, 10*time.Second, "a failed attempt", func() bool {
		return strings.Contains(text(byID(e.page(t, "/ui/event?provider=default&id=evt_1"), "forwarding")), "<b>busy</b>")
	})
	doc := e.page(t, "/ui/event?provider=default&id=evt_1")
	fw := text(byID(doc, "forwarding"))
	for _, want := range []string{"app", msg, "pending", "503", "<b>busy</b>"} {
		if !strings.Contains(fw, want) {
			t.Errorf("event page forwarding lacks %q: %s", want, fw)
		}
	}
	ov := tableRows(t, e.page(t, "/ui/"), "forwarding")
	if len(ov) != 1 || ov[0][0] != "app" || ov[0][1] != "1" || ov[0][4] != "0" {
		t.Errorf("overview forwarding %q", ov)
	}
	up.Store(true)
	await.Eventually(t, 10*time.Second, "delivery", func() bool {
		return strings.Contains(text(byID(e.page(t, "/ui/event?provider=default&id=evt_1"), "forwarding")), "delivered")
	})
	if ov := tableRows(t, e.page(t, "/ui/"), "forwarding"); ov[0][1] != "0" || ov[0][4] != "1" {
		t.Errorf("after delivery, overview forwarding %q", ov)
	}
	// Without destinations there is no forwarding card.
	e.Console.Destinations = nil
	if byID(e.page(t, "/ui/"), "forwarding") != nil {
		t.Error("a forwarding card without destinations")
	}
}
