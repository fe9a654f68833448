// Package stripe pushes the ledger's usage to Stripe Billing's meters
// (docs/stripe.md): the meter events a ledger row or an invoice line becomes
// (push.go), the small API client the relay sends them with (this file), and
// the comparison of what the ledger says, what was pushed and what Stripe
// acknowledged (status.go). The outbox relay (forward) delivers the pushes.
package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/redact"
)

// Stripe's window for a meter event's timestamp (POST /v1/billing/meter_events).
const (
	MaxAge    = 35 * 24 * time.Hour
	MaxFuture = 5 * time.Minute
)

// duplicateMessage starts Stripe's answer to an identifier it has already
// accepted (400, stripe-should-retry: false).
const duplicateMessage = "An event already exists with identifier"

// Client calls Stripe's API with a secret key. The key is sent in the
// Authorization header only and never appears in an error it returns.
type Client struct {
	Base      string // e.g. https://api.stripe.com, without a trailing slash
	Key       string
	HTTP      *http.Client
	UserAgent string
}

// MeterEvent is one POST /v1/billing/meter_events.
type MeterEvent struct {
	EventName  string
	Identifier string
	Customer   string // payload[stripe_customer_id]
	Value      string // payload[value], a whole number
	Timestamp  int64  // unix seconds
}

// bodyKeep is how much of an answer's body a Result keeps.
const bodyKeep = 1 << 10

// Result is what one request found. It never fails: a transport error is
// in Err with Status 0.
type Result struct {
	Status     int
	Body       []byte // the first KiB, scrubbed of the call's Secrets
	Err        string // "" when Stripe took the event (2xx or a duplicate)
	Duplicate  bool   // Stripe already had the identifier: delivered before
	Permanent  bool   // Stripe refused the event itself: sending it again cannot help
	RetryAfter time.Duration
	Latency    time.Duration
}

// OK reports whether Stripe holds the event.
func (r Result) OK() bool { return r.Err == "" }

// CheckWindow says why Stripe would refuse timestamp ts at now, or nil.
func CheckWindow(ts int64, now time.Time) error {
	at := time.Unix(ts, 0).UTC()
	switch {
	case at.Before(now.Add(-MaxAge)):
		return fmt.Errorf("timestamp %s is more than 35 days ago: Stripe takes meter events from the past 35 days only", at.Format(time.RFC3339))
	case at.After(now.Add(MaxFuture)):
		return fmt.Errorf("timestamp %s is more than 5 minutes ahead: Stripe takes meter events up to 5 minutes in the future", at.Format(time.RFC3339))
	}
	return nil
}

// SendMeterEvent posts e.
func (c *Client) SendMeterEvent(ctx context.Context, e MeterEvent) Result {
	form := url.Values{}
	form.Set("event_name", e.EventName)
	form.Set("identifier", e.Identifier)
	form.Set("payload[stripe_customer_id]", e.Customer)
	form.Set("payload[value]", e.Value)
	form.Set("timestamp", strconv.FormatInt(e.Timestamp, 10))
	return c.do(ctx, http.MethodPost, "/v1/billing/meter_events", form)
}

// CancelMeterEvent posts POST /v1/billing/meter_event_adjustments with
// type=cancel: Stripe takes the meter event identifier names (of
// eventName) out of its meter, if it received it less than 24 hours ago
// (else it answers 400). key is the request's Idempotency-Key, so a resend
// after a lost answer gets the first answer again instead of a refusal.
func (c *Client) CancelMeterEvent(ctx context.Context, eventName, identifier, key string) Result {
	form := url.Values{}
	form.Set("event_name", eventName)
	form.Set("type", "cancel")
	form.Set("cancel[identifier]", identifier)
	return c.doWith(ctx, http.MethodPost, "/v1/billing/meter_event_adjustments", form, key)
}

// apiError is Stripe's error body.
type apiError struct {
	Error struct {
		Type    string `json:"type"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *Client) do(ctx context.Context, method, path string, form url.Values) Result {
	return c.doWith(ctx, method, path, form, "")
}

func (c *Client) doWith(ctx context.Context, method, path string, form url.Values, idempotencyKey string) Result {
	return c.call(ctx, method, path, form, idempotencyKey, nil)
}

// objectLimit is how much of an object Stripe returns call reads to decode
// it (an invoice with its first lines is a few KiB).
const objectLimit = 4 << 20

// call makes one request and, when v is set and Stripe answers 2xx, decodes
// the answer into v (a body that does not decode is an error, retried).
func (c *Client) call(ctx context.Context, method, path string, form url.Values, idempotencyKey string, v any) Result {
	sent := c.Secrets()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, body)
	if err != nil {
		return Result{Err: sent.String(err.Error())}
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		msg := err.Error()
		var ue *url.Error
		if errors.As(err, &ue) {
			msg = ue.Err.Error() // without the URL
		}
		if errors.Is(err, context.DeadlineExceeded) {
			msg = "timeout"
		}
		return Result{Err: sent.String(msg), Latency: time.Since(start)}
	}
	defer resp.Body.Close()
	// Past the KiB kept, so that a key straddling it is scrubbed whole.
	limit := int64(bodyKeep + sent.Slack())
	if v != nil {
		limit = objectLimit
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	r := Result{Status: resp.StatusCode, Body: sent.Cut(b, bodyKeep), Latency: time.Since(start)}
	if r.Status >= 200 && r.Status < 300 {
		if v != nil {
			if err := json.Unmarshal(b, v); err != nil {
				r.Err = sent.String(fmt.Sprintf("%s %s: the answer does not decode: %v", method, strings.SplitN(path, "?", 2)[0], err))
			}
		}
		return r
	}
	var ae apiError
	_ = json.Unmarshal(b, &ae)
	msg := ae.Error.Message
	if msg == "" {
		msg = http.StatusText(r.Status)
	}
	r.Err = sent.String(fmt.Sprintf("HTTP %d: %s", r.Status, msg))
	switch {
	case r.Status == http.StatusBadRequest && strings.Contains(ae.Error.Message, duplicateMessage):
		// The event was sent before (the answer to it was lost, or a
		// relay died before recording it): Stripe has it once.
		r.Err, r.Duplicate = "", true
	case r.Status == http.StatusBadRequest:
		// Stripe refused the event's content (a customer it does not
		// know, a timestamp outside its window): the same request fails
		// again, whatever stripe-should-retry says.
		r.Permanent = true
	case resp.Header.Get("Stripe-Should-Retry") == "false" && r.Status != http.StatusUnauthorized &&
		r.Status != http.StatusForbidden && r.Status != http.StatusTooManyRequests:
		r.Permanent = true
	default:
		r.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
	}
	return r
}

// Secrets are what every call of c sends that must not be stored or shown:
// the key (as "Bearer <key>" in the Authorization header) and any
// credentials in Base. Everything a call returns (Result's Body and Err, an
// error) is scrubbed with them; the relay scrubs what it stores with them
// too (forward).
func (c *Client) Secrets() *redact.Secrets {
	return redact.New(c.Key).WithURL(c.Base)
}

func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, 24*time.Hour)
}

// Meter is a Stripe meter, as GET /v1/billing/meters lists it.
type Meter struct {
	ID        string `json:"id"`
	EventName string `json:"event_name"`
	Status    string `json:"status"`
}

// Meters lists the account's meters (the first 100).
func (c *Client) Meters(ctx context.Context) ([]Meter, error) {
	var out struct {
		Data []Meter `json:"data"`
	}
	if err := c.get(ctx, "/v1/billing/meters?limit=100", &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// EventSummary is one of a meter's event summaries for a customer.
type EventSummary struct {
	AggregatedValue json.Number `json:"aggregated_value"`
	StartTime       int64       `json:"start_time"`
	EndTime         int64       `json:"end_time"`
}

// EventSummaries reads GET /v1/billing/meters/{id}/event_summaries for
// customer over [start, end) (unix seconds).
func (c *Client) EventSummaries(ctx context.Context, meterID, customer string, start, end int64) ([]EventSummary, error) {
	q := url.Values{}
	q.Set("customer", customer)
	q.Set("start_time", strconv.FormatInt(start, 10))
	q.Set("end_time", strconv.FormatInt(end, 10))
	var out struct {
		Data []EventSummary `json:"data"`
	}
	if err := c.get(ctx, "/v1/billing/meters/"+url.PathEscape(meterID)+"/event_summaries?"+q.Encode(), &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

func (c *Client) get(ctx context.Context, path string, v any) error {
	sent := c.Secrets()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+path, nil)
	if err != nil {
		return errors.New(sent.String(err.Error()))
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return errors.New(sent.String(err.Error()))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return errors.New(sent.String(err.Error()))
	}
	if resp.StatusCode != http.StatusOK {
		var ae apiError
		_ = json.Unmarshal(b, &ae)
		return errors.New(sent.String(fmt.Sprintf("GET %s: HTTP %d: %s", strings.SplitN(path, "?", 2)[0], resp.StatusCode, ae.Error.Message)))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %w", strings.SplitN(path, "?", 2)[0], err)
	}
	return nil
}
