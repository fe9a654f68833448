package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/scheme"
)

const (
	stripeSecret = "whsec_test_reconcile"
	stripeKey    = "sk_test_reconcile"
	githubSecret = "gh-webhook-secret"
	githubToken  = "ghp_test_reconcile"
)

var testNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const testYAML = `data: %s
providers:
  - name: stripe
    scheme: stripe
    secrets: ["%s"]
    reconcile:
      base_url: %s
      api_key: %s
  - name: github
    scheme: github
    secrets: ["%s"]
    reconcile:
      base_url: %s
      api_key: %s
      repo: acme/app
      hook_id: 42
  - name: files
    scheme: standard
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
    replay_horizon: 2d
    reconcile:
      source: file
      file: events.jsonl
%s
usage:
  - provider: stripe
    type: billing.meter_event
    customer: data.object.customer
    meter: {value: api_requests}
    quantity: %s
    occurred_at: created
  - provider: files
    type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
`

// env is a receiver on a real SQLite file behind a real HTTP listener, with a
// fake Stripe events API and a fake GitHub deliveries API beside it.
type env struct {
	*testenv.Env
	stripe *fakeStripe
	github *fakeGitHub
}

type envOptions struct {
	retention    string // YAML appended at top level
	quantityPath string // the stripe mapping's quantity path
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.quantityPath == "" {
		o.quantityPath = "data.object.value"
	}
	dir := t.TempDir()
	e := &env{stripe: &fakeStripe{key: stripeKey}}
	stripeAPI := httptest.NewServer(e.stripe)
	t.Cleanup(stripeAPI.Close)
	e.github = &fakeGitHub{token: githubToken, secret: githubSecret, posts: map[string]int{}, deliverOn: map[string]bool{}}
	githubAPI := httptest.NewServer(e.github)
	t.Cleanup(githubAPI.Close)
	e.github.base = githubAPI.URL

	src := fmt.Sprintf(testYAML, dir, stripeSecret, stripeAPI.URL, stripeKey, githubSecret, githubAPI.URL, githubToken,
		o.retention, o.quantityPath)
	cfg, err := config.Parse([]byte(src), dir)
	if err != nil {
		t.Fatal(err)
	}
	e.Env = testenv.New(t, testenv.Options{Dir: dir, Config: cfg, Now: testNow})
	e.github.webhook = e.HTTP.URL + "/webhooks/github"
	return e
}

// reconciler builds the provider's reconciler as the CLI does, with fast retries.
func (e *env) reconciler(name string) *Reconciler {
	r, err := ForProvider(e.Provider(name), nil, Reconciler{DB: e.DB, Writer: e.Writer, Mapper: e.Mapper(), HandlerVersion: "test", Now: e.Now})
	if err != nil {
		e.T.Fatal(err)
	}
	fast := Retry{MaxTries: 3, InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond, MaxRetryAfter: 3 * time.Second}
	switch s := r.Source.(type) {
	case *StripeSource:
		s.Client.Retry = fast
	case *GitHubSource:
		s.Client.Retry = fast
		s.PerPage = 3
	}
	return r
}

// post signs body as provider would and POSTs it to the receiver.
func (e *env) post(provider, id, typ string, body []byte) (int, map[string]any) {
	e.T.Helper()
	code, raw := e.Deliver(provider, id, typ, body)
	var r map[string]any
	json.Unmarshal(raw, &r)
	return code, r
}

// usageSum is the ledger total for a provider in micro-units.
func (e *env) usageSum(provider string) ledger.Quantity {
	e.T.Helper()
	var q int64
	if err := e.DB.Read.Get(&q, `SELECT COALESCE(SUM(quantity), 0) FROM metered_usage WHERE provider = ?`, provider); err != nil {
		e.T.Fatal(err)
	}
	return ledger.Quantity(q)
}

func (e *env) checkpoint(provider string) Checkpoint {
	e.T.Helper()
	cp, _, err := LoadCheckpoint(context.Background(), e.DB, provider)
	if err != nil {
		e.T.Fatal(err)
	}
	return cp
}

func (e *env) writeFile(name, content string) string {
	p := filepath.Join(e.Dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.T.Fatal(err)
	}
	return p
}

// stripeEventJSON is a billing meter event as Stripe's API and webhooks carry it.
func stripeEventJSON(i int, created time.Time) []byte {
	return []byte(fmt.Sprintf(`{"id":"evt_%03d","object":"event","type":"billing.meter_event","created":%d,"data":{"object":{"customer":"cus_%d","value":%d}}}`,
		i, created.Unix(), i%5, i%7+1))
}

// fakeStripe serves GET /v1/events like Stripe: newest first, created[gte]/[lte],
// limit, starting_after, has_more, Bearer auth.
type fakeStripe struct {
	key string

	mu       sync.Mutex
	events   [][]byte // newest first
	created  []int64
	ids      []string
	requests []stripeRequest
	// fail, when set, may answer a request instead: page is 1-based, attempt
	// counts requests for that page so far (1-based).
	fail         func(page, attempt int) (code int, retryAfter string)
	tries        map[int]int
	unauthorized int
	unsorted     bool
}

type stripeRequest struct {
	StartingAfter string
	Page          int
	At            time.Time
	Code          int
}

func (f *fakeStripe) add(body []byte) {
	var ev struct {
		ID      string `json:"id"`
		Created int64  `json:"created"`
	}
	json.Unmarshal(body, &ev)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events, f.created, f.ids = append(f.events, body), append(f.created, ev.Created), append(f.ids, ev.ID)
	f.unsorted = true
}

// sort orders the events newest first, ties by id descending, as Stripe does.
func (f *fakeStripe) sort() {
	if !f.unsorted {
		return
	}
	f.unsorted = false
	idx := make([]int, len(f.events))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		if f.created[idx[a]] != f.created[idx[b]] {
			return f.created[idx[a]] > f.created[idx[b]]
		}
		return f.ids[idx[a]] > f.ids[idx[b]]
	})
	ev2, cr2, id2 := make([][]byte, len(idx)), make([]int64, len(idx)), make([]string, len(idx))
	for i, j := range idx {
		ev2[i], cr2[i], id2[i] = f.events[j], f.created[j], f.ids[j]
	}
	f.events, f.created, f.ids = ev2, cr2, id2
}

func (f *fakeStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Request-Id", fmt.Sprintf("req_%d", len(f.requests)+1))
	if r.Method != http.MethodGet || r.URL.Path != "/v1/events" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.key {
		f.unauthorized++
		http.Error(w, `{"error":{"message":"Invalid API Key provided"}}`, http.StatusUnauthorized)
		return
	}
	f.sort()
	q := r.URL.Query()
	gte, _ := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
	lte, err := strconv.ParseInt(q.Get("created[lte]"), 10, 64)
	if err != nil {
		lte = 1 << 62
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	var in []int
	for i := range f.events {
		if f.created[i] >= gte && f.created[i] <= lte {
			in = append(in, i)
		}
	}
	start := 0
	if after := q.Get("starting_after"); after != "" {
		start = -1
		for k, i := range in {
			if f.ids[i] == after {
				start = k + 1
			}
		}
		if start < 0 {
			http.Error(w, `{"error":{"message":"No such event"}}`, http.StatusBadRequest)
			return
		}
	}
	page := start/limit + 1
	rq := stripeRequest{StartingAfter: q.Get("starting_after"), Page: page, At: time.Now(), Code: 200}
	if f.tries == nil {
		f.tries = map[int]int{}
	}
	f.tries[page]++
	if f.fail != nil {
		if code, ra := f.fail(page, f.tries[page]); code != 0 {
			rq.Code = code
			f.requests = append(f.requests, rq)
			if ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			http.Error(w, `{"error":{"message":"try again"}}`, code)
			return
		}
	}
	f.requests = append(f.requests, rq)
	end := min(start+limit, len(in))
	data := make([]json.RawMessage, 0, end-start)
	for _, i := range in[start:end] {
		data = append(data, f.events[i])
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "url": "/v1/events", "has_more": end < len(in), "data": data})
}

func (f *fakeStripe) log() []stripeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stripeRequest(nil), f.requests...)
}

// fakeGitHub serves a repository hook's deliveries like GitHub: newest first,
// per_page, an opaque cursor in the Link header, and POST …/attempts, which
// redelivers (signed) to the receiver when deliverOn says so.
type fakeGitHub struct {
	token, secret string
	base, webhook string

	mu         sync.Mutex
	deliveries []githubDeliveryJSON // newest first
	payloads   map[string][]byte    // by guid
	posts      map[string]int       // POST attempts per delivery id
	deliverOn  map[string]bool      // guid -> redeliver to the receiver
	postFail   map[string]int       // delivery id -> status to answer instead of 202
	lists      int
}

type githubDeliveryJSON struct {
	ID          int64  `json:"id"`
	GUID        string `json:"guid"`
	DeliveredAt string `json:"delivered_at"`
	Redelivery  bool   `json:"redelivery"`
	Duration    float64
	Status      string `json:"status"`
	StatusCode  int    `json:"status_code"`
	Event       string `json:"event"`
	Action      string `json:"action"`
}

const hookPath = "/repos/acme/app/hooks/42/deliveries"

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+f.token || r.Header.Get("X-GitHub-Api-Version") == "" {
		http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
		return
	}
	w.Header().Set("X-GitHub-Request-Id", "GH-REQ-1")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == hookPath:
		f.mu.Lock()
		defer f.mu.Unlock()
		f.lists++
		per, _ := strconv.Atoi(r.URL.Query().Get("per_page"))
		start := 0
		if c := r.URL.Query().Get("cursor"); c != "" {
			start, _ = strconv.Atoi(strings.TrimPrefix(c, "v1_"))
		}
		end := min(start+per, len(f.deliveries))
		if end < len(f.deliveries) {
			next := fmt.Sprintf("%s%s?per_page=%d&cursor=v1_%d", f.base, hookPath, per, end)
			w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <%s%s?per_page=%d>; rel="first"`, next, f.base, hookPath, per))
		}
		json.NewEncoder(w).Encode(f.deliveries[start:end])
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, hookPath+"/") && strings.HasSuffix(r.URL.Path, "/attempts"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, hookPath+"/"), "/attempts")
		f.mu.Lock()
		f.posts[id]++
		code := f.postFail[id]
		var d *githubDeliveryJSON
		for i := range f.deliveries {
			if strconv.FormatInt(f.deliveries[i].ID, 10) == id {
				d = &f.deliveries[i]
			}
		}
		f.mu.Unlock()
		if code != 0 {
			http.Error(w, `{"message":"nope"}`, code)
			return
		}
		if d == nil {
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		if f.deliverOn[d.GUID] {
			f.redeliver(d.GUID, d.Event)
		}
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "{}")
	default:
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}
}

// redeliver sends the delivery to the receiver as GitHub does: signed body,
// the same GUID in X-GitHub-Delivery.
func (f *fakeGitHub) redeliver(guid, event string) {
	s, _ := scheme.New("github", scheme.HMACOptions{})
	key, _ := s.Key(f.secret)
	body := f.payloads[guid]
	h := http.Header{}
	s.Sign(h, body, key, guid, event, time.Now())
	req, _ := http.NewRequest(http.MethodPost, f.webhook, bytes.NewReader(body))
	req.Header = h
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

func (f *fakeGitHub) postCount(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.posts[id]
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }
