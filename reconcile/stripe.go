package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// StripeSource lists events with Stripe's events API:
// GET /v1/events?created[gte]=…&created[lte]=…&limit=100&starting_after=…,
// newest first, with has_more telling whether another page follows. Each
// event's JSON is the same object a webhook delivers.
type StripeSource struct {
	Client Client   // BaseURL default https://api.stripe.com; Token is the secret key
	Types  []string // types[] filter (at most 20, Stripe's limit); empty: every type
	Limit  int      // page size, 1..100; default 100
}

// NewStripeSource returns a source for the events API at baseURL.
func NewStripeSource(baseURL, key string) *StripeSource {
	return &StripeSource{Client: Client{BaseURL: baseURL, Token: key, RequestIDHeader: "Request-Id"}}
}

// Name implements Source.
func (s *StripeSource) Name() string { return "stripe-api" }

type stripeList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

type stripeEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
}

// List implements Source. The cursor is the id of the last event of the
// previous page (starting_after).
func (s *StripeSource) List(ctx context.Context, w Window, cursor string) (Page, error) {
	limit := s.Limit
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	q := url.Values{}
	q.Set("created[gte]", strconv.FormatInt(w.From.Unix(), 10))
	q.Set("created[lte]", strconv.FormatInt(w.To.Unix(), 10))
	q.Set("limit", strconv.Itoa(limit))
	if cursor != "" {
		q.Set("starting_after", cursor)
	}
	for _, t := range s.Types {
		q.Add("types[]", t)
	}
	res, err := s.Client.do(ctx, "GET", "/v1/events", q)
	if err != nil {
		return Page{}, err
	}
	var l stripeList
	if err := json.Unmarshal(res.Body, &l); err != nil || l.Object != "list" {
		return Page{}, fmt.Errorf("GET /v1/events: not a list object: %s", s.Client.snippet(res.Body))
	}
	p := Page{RequestID: res.RequestID}
	for i, raw := range l.Data {
		var e stripeEvent
		if err := json.Unmarshal(raw, &e); err != nil || e.ID == "" {
			return Page{}, fmt.Errorf("GET /v1/events: data[%d] is not an event with an id: %s", i, s.Client.snippet(raw))
		}
		p.Events = append(p.Events, Event{ID: e.ID, Type: e.Type, Created: time.Unix(e.Created, 0).UTC(), Body: []byte(raw)})
	}
	if l.HasMore {
		if len(p.Events) == 0 {
			return Page{}, fmt.Errorf("GET /v1/events: has_more with an empty page")
		}
		p.Next = p.Events[len(p.Events)-1].ID
	}
	return p, nil
}
