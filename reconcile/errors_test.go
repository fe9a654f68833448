package reconcile

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// answer serves one fixed response to every request.
func answer(t *testing.T, code int, header http.Header, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(code)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestMalformedAPIAnswers(t *testing.T) {
	w := Window{From: testNow.Add(-time.Hour), To: testNow}
	ctx := context.Background()
	for name, tc := range map[string]struct {
		body, want string
		github     bool
	}{
		"stripe not JSON":         {body: `<html>`, want: "not a list object"},
		"stripe not a list":       {body: `{"object":"event"}`, want: "not a list object"},
		"stripe event without id": {body: `{"object":"list","data":[{"type":"x"}]}`, want: "data[0] is not an event with an id"},
		"stripe has_more, no data": {body: `{"object":"list","data":[],"has_more":true}`,
			want: "has_more with an empty page"},
		"github not a list":       {body: `{"message":"x"}`, want: "not a list of deliveries", github: true},
		"github delivery sans id": {body: `[{"guid":"","delivered_at":"2026-11-29T11:30:00Z"}]`, want: "delivery [0] has no id or guid", github: true},
	} {
		t.Run(name, func(t *testing.T) {
			url := answer(t, 200, nil, tc.body)
			var err error
			if tc.github {
				_, err = NewGitHubSource(url, "t", "a/b", "", 1).List(ctx, w, "")
			} else {
				_, err = NewStripeSource(url, "k").List(ctx, w, "")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("error body is quoted, shortened", func(t *testing.T) {
		url := answer(t, 400, nil, `{"error":{"message":"`+strings.Repeat("x", 1000)+`"}}`)
		_, err := NewStripeSource(url, "k").List(ctx, w, "")
		var se *StatusError
		if !errors.As(err, &se) || se.Code != 400 || len(se.Body) > 310 || !strings.HasPrefix(se.Body, `{"error"`) {
			t.Errorf("err %v", err)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		s := NewStripeSource("http://127.0.0.1:1", "k")
		s.Client.Retry = Retry{MaxTries: 2, InitialInterval: time.Millisecond}
		if _, err := s.List(ctx, w, ""); err == nil || !strings.Contains(err.Error(), "GET /v1/events") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("canceled context stops retrying", func(t *testing.T) {
		url := answer(t, 503, nil, "")
		s := NewStripeSource(url, "k")
		s.Client.Retry = Retry{MaxTries: 100, InitialInterval: 50 * time.Millisecond}
		cctx, cancel := context.WithTimeout(ctx, 120*time.Millisecond)
		defer cancel()
		start := time.Now()
		if _, err := s.List(cctx, w, ""); err == nil {
			t.Fatal("no error")
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("kept retrying for %v after the context ended", time.Since(start))
		}
	})
	t.Run("redeliver without delivery id", func(t *testing.T) {
		if _, err := NewGitHubSource("http://x", "t", "", "acme", 1).Redeliver(ctx, Event{ID: "g"}); err == nil {
			t.Error("no error")
		}
	})
}

// stubSource returns scripted pages.
type stubSource struct{ pages []Page }

func (s *stubSource) Name() string { return "stub" }
func (s *stubSource) List(_ context.Context, _ Window, cursor string) (Page, error) {
	for i := 1; cursor != "" && i < len(s.pages); i++ {
		if s.pages[i-1].Next == cursor {
			return s.pages[i], nil
		}
	}
	return s.pages[0], nil
}

func TestReconcilerGuards(t *testing.T) {
	e := newEnv(t, envOptions{})
	base := e.reconciler("stripe")
	t.Run("a cursor that does not move ends the run", func(t *testing.T) {
		r := *base
		r.Source = &stubSource{pages: []Page{{Next: "c1"}, {Next: "c1"}}}
		rep, err := r.Run(context.Background(), Options{})
		if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), `same cursor "c1" twice`) || rep.Pages != 2 {
			t.Errorf("err %v report %+v", err, rep)
		}
	})
	t.Run("an event without a body from a source that cannot redeliver", func(t *testing.T) {
		r := *base
		r.Provider = "files"
		r.Source = &stubSource{pages: []Page{{Events: []Event{{ID: "x1", Created: testNow.Add(-time.Hour)}}}}}
		rep, err := r.Run(context.Background(), Options{})
		if !errors.Is(err, ErrIncomplete) || rep.Failed != 1 || !strings.Contains(err.Error(), "cannot redeliver") {
			t.Errorf("err %v report %+v", err, rep)
		}
	})
	t.Run("an interrupted run older than the window starts afresh", func(t *testing.T) {
		stale := Checkpoint{Provider: "stripe", WindowStart: testNow.Add(-100 * time.Hour).UnixMilli(),
			WindowEnd: testNow.Add(-90 * time.Hour).UnixMilli(), Cursor: "evt_gone", Pages: 3}
		if err := e.Writer.Submit(context.Background(), saveCheckpoint(stale)); err != nil {
			t.Fatal(err)
		}
		r := *base
		r.Source = &stubSource{pages: []Page{{}}}
		rep, err := r.Run(context.Background(), Options{})
		if err != nil || rep.Resumed || !rep.WindowFrom.Equal(testNow.Add(-r.Window)) || !rep.Complete {
			t.Errorf("err %v report %+v", err, rep)
		}
		if cp := e.checkpoint("stripe"); cp.Cursor != "" || cp.CompletedThrough != rep.WindowTo.UnixMilli() {
			t.Errorf("checkpoint %+v", cp)
		}
	})
	t.Run("a checkpoint ahead of the clock gives an empty window, not a backwards one", func(t *testing.T) {
		cp := Checkpoint{Provider: "stripe", CompletedThrough: testNow.Add(time.Hour).UnixMilli()}
		if err := e.Writer.Submit(context.Background(), saveCheckpoint(cp)); err != nil {
			t.Fatal(err)
		}
		r := *base
		r.Source = &stubSource{pages: []Page{{Events: []Event{{ID: "x", Body: []byte(`{}`)}}}}}
		rep, err := r.Run(context.Background(), Options{})
		if err != nil || !rep.Complete || rep.Pages != 0 || rep.Seen != 0 {
			t.Errorf("err %v report %+v", err, rep)
		}
	})
}
