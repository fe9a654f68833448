// Package fakestripe is a small in-process Stripe for billing sync tests:
// what stripe-mock (stateless, never failing) cannot show. It keeps the
// meter events it accepted, answers a repeated identifier as Stripe does
// (400 "An event already exists with identifier …", stripe-should-retry:
// false), refuses timestamps outside Stripe's window, cancels an event it
// received less than 24 hours ago (meter event adjustments; older: 400),
// replays the first answer to a repeated Idempotency-Key, and fails the
// calls a test asks it to fail: 429 with Retry-After, 5xx, or a 5xx after
// storing the event (a lost response).
package fakestripe

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Failure is how a failed call fails.
type Failure int

// Failures a test asks for.
const (
	None      Failure = iota
	Throttle          // 429 with Retry-After: 1, nothing stored
	Down              // 503, nothing stored
	LostReply         // the event is stored, then 500: the sender never hears
)

// Event is an accepted meter event.
type Event struct {
	EventName  string
	Identifier string
	Customer   string
	Value      string
	Timestamp  int64
	Received   time.Time // Now when it was accepted
	Canceled   bool      // a meter event adjustment took it back
}

// Stripe is the fake. Set Fail before requests arrive or under Mu.
type Stripe struct {
	URL string
	Key string // the secret key it accepts

	Mu sync.Mutex
	// Fail decides each call's failure by its number (1, 2, …); nil: none.
	Fail func(n int) Failure
	// Latency is how long each call takes before it is answered (Stripe
	// answers a VM in about 150 ms); the calls overlap as Stripe's do.
	Latency time.Duration
	// Gate, when set, holds calls until it is closed: every meter event
	// call (its identifier is in Seen first), or with HoldAt only the call
	// that arrives HoldAt-th. A request in flight.
	Gate   chan struct{}
	HoldAt int
	// Arrived counts the calls as they arrive, before any is held.
	Arrived int
	// Seen are the identifiers of the meter event calls, in the order
	// they arrived, repeats included.
	Seen   []string
	Now    func() time.Time
	Events map[string]Event // by identifier
	Calls  int
	// Refused counts the calls answered with an error other than a
	// duplicate, by status.
	Refused    map[int]int
	Duplicates int
	// Cancels counts the accepted cancels (meter event adjustments).
	Cancels int
	// replies are the answers given per Idempotency-Key.
	replies map[string]reply
	// invoices are the invoices created, in creation order (invoices.go).
	invoices []*Invoice
}

type reply struct {
	status int
	body   []byte
	at     time.Time // Stripe keeps an idempotency key 24 hours
}

// New is a fake Stripe accepting key, to serve (an http.Handler) where the
// caller likes: a benchmark's own server.
func New(key string) *Stripe {
	return &Stripe{Key: key, Now: time.Now, Events: map[string]Event{}, Refused: map[int]int{}}
}

// Serve starts a fake Stripe on loopback accepting key.
func Serve(t testing.TB, key string) *Stripe {
	s := New(key)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

func (s *Stripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.Mu.Lock()
	s.Arrived++
	meterEvent := r.Method == http.MethodPost && r.URL.Path == "/v1/billing/meter_events" && r.ParseForm() == nil
	if meterEvent {
		s.Seen = append(s.Seen, r.PostForm.Get("identifier"))
	}
	latency, gate := s.Latency, s.Gate
	if (s.HoldAt == 0 && !meterEvent) || (s.HoldAt != 0 && s.HoldAt != s.Arrived) {
		gate = nil
	}
	s.Mu.Unlock()
	if latency > 0 {
		time.Sleep(latency) // the network and Stripe's work, outside the lock
	}
	if gate != nil {
		<-gate
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Key {
		s.answer(w, http.StatusUnauthorized, "Invalid API Key provided", "")
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == "/v1/billing/meter_event_adjustments" {
		s.adjust(w, r)
		return
	}
	if s.invoiceCall(w, r) {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/billing/meter_events" {
		s.answer(w, http.StatusNotFound, "Unrecognized request URL", "")
		return
	}
	if err := r.ParseForm(); err != nil {
		s.answer(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	e := Event{EventName: r.PostForm.Get("event_name"), Identifier: r.PostForm.Get("identifier"),
		Customer: r.PostForm.Get("payload[stripe_customer_id]"), Value: r.PostForm.Get("payload[value]")}
	e.Timestamp, _ = strconv.ParseInt(r.PostForm.Get("timestamp"), 10, 64)
	s.Mu.Lock()
	defer s.Mu.Unlock()
	f, failed := s.call(w)
	if failed {
		return
	}
	now := s.Now()
	if _, ok := new(big.Int).SetString(e.Value, 10); !ok {
		s.answer(w, http.StatusBadRequest, fmt.Sprintf("payload[value] %q is not a whole number", e.Value), "false")
		return
	}
	at := time.Unix(e.Timestamp, 0)
	if at.Before(now.Add(-35*24*time.Hour)) || at.After(now.Add(5*time.Minute)) {
		s.answer(w, http.StatusBadRequest, "Timestamp must be within the past 35 days and no more than 5 minutes in the future", "false")
		return
	}
	if _, dup := s.Events[e.Identifier]; dup {
		s.Duplicates++
		s.answer(w, http.StatusBadRequest, "An event already exists with identifier "+e.Identifier+".", "false")
		return
	}
	e.Received = now
	s.Events[e.Identifier] = e
	if f == LostReply {
		s.answer(w, http.StatusInternalServerError, "An error occurred", "true")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "billing.meter_event", "event_name": e.EventName,
		"identifier": e.Identifier, "payload": map[string]string{"stripe_customer_id": e.Customer, "value": e.Value},
		"timestamp": e.Timestamp})
}

// call counts a call and decides its failure (Fail): a throttle or an
// outage is answered here (failed: nothing more is done), a lost reply is
// the caller's to answer once it has done the call's work.
func (s *Stripe) call(w http.ResponseWriter) (f Failure, failed bool) {
	s.Calls++
	if s.Fail != nil {
		f = s.Fail(s.Calls)
	}
	switch f {
	case Throttle:
		w.Header().Set("Retry-After", "1")
		s.answer(w, http.StatusTooManyRequests, "Too many requests", "true")
		return f, true
	case Down:
		s.answer(w, http.StatusServiceUnavailable, "Service unavailable", "true")
		return f, true
	}
	return f, false
}

func (s *Stripe) answer(w http.ResponseWriter, status int, msg, retry string) {
	if status != http.StatusBadRequest || len(msg) < 8 || msg[:8] != "An event" {
		if s.Refused != nil {
			s.Refused[status]++
		}
	}
	if retry != "" {
		w.Header().Set("Stripe-Should-Retry", retry)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"type": "invalid_request_error", "message": msg}})
}

// Totals sums the accepted values per customer and event name.
func (s *Stripe) Totals() map[[2]string]*big.Int {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	out := map[[2]string]*big.Int{}
	for _, e := range s.Events {
		if e.Canceled {
			continue
		}
		k := [2]string{e.Customer, e.EventName}
		if out[k] == nil {
			out[k] = new(big.Int)
		}
		v, _ := new(big.Int).SetString(e.Value, 10)
		out[k].Add(out[k], v)
	}
	return out
}

// Snapshot copies the accepted events.
func (s *Stripe) Snapshot() map[string]Event {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	out := make(map[string]Event, len(s.Events))
	for k, v := range s.Events {
		out[k] = v
	}
	return out
}

// adjust answers POST /v1/billing/meter_event_adjustments (type=cancel):
// the event named by cancel[identifier] is canceled if it was received
// less than 24 hours ago; a repeated Idempotency-Key gets the first answer.
// It fails as Fail says, as meter events do (LostReply: the cancel is
// done and its answer kept for a replay, then 500).
func (s *Stripe) adjust(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.answer(w, http.StatusBadRequest, err.Error(), "")
		return
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	f, failed := s.call(w)
	if failed {
		return
	}
	s.idempotent(w, r, f, func(w http.ResponseWriter) {
		s.cancel(w, r.PostForm.Get("event_name"), r.PostForm.Get("type"), r.PostForm.Get("cancel[identifier]"))
	})
}

// idempotent answers a POST the way Stripe does with its Idempotency-Key:
// a key seen less than 24 hours ago gets the first answer again; otherwise
// do answers, and its answer is kept under the key. A lost reply (f) does
// the work, keeps the answer, then says 500. Call it under Mu, after call.
func (s *Stripe) idempotent(w http.ResponseWriter, r *http.Request, f Failure, do func(w http.ResponseWriter)) {
	key := r.Header.Get("Idempotency-Key")
	if rep, ok := s.replies[key]; ok && key != "" && s.Now().Before(rep.at.Add(24*time.Hour)) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(rep.status)
		w.Write(rep.body)
		return
	}
	rec := httptest.NewRecorder()
	do(rec)
	if key != "" {
		if s.replies == nil {
			s.replies = map[string]reply{}
		}
		s.replies[key] = reply{rec.Code, rec.Body.Bytes(), s.Now()}
	}
	if f == LostReply {
		s.answer(w, http.StatusInternalServerError, "An error occurred", "true")
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func (s *Stripe) cancel(w http.ResponseWriter, eventName, typ, identifier string) {
	e, ok := s.Events[identifier]
	switch {
	case typ != "cancel":
		s.answer(w, http.StatusBadRequest, "type must be cancel", "false")
	case !ok || e.EventName != eventName:
		s.answer(w, http.StatusBadRequest, "No meter event with identifier "+identifier+" for event_name "+eventName, "false")
	case e.Canceled:
		s.answer(w, http.StatusBadRequest, "The meter event "+identifier+" is already canceled", "false")
	case !s.Now().Before(e.Received.Add(24 * time.Hour)):
		s.answer(w, http.StatusBadRequest, "You can only cancel events within 24 hours of Stripe receiving them", "false")
	default:
		e.Canceled = true
		s.Events[identifier] = e
		s.Cancels++
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "billing.meter_event_adjustment", "event_name": eventName,
			"status": "pending", "type": "cancel", "cancel": map[string]string{"identifier": identifier}})
	}
}
