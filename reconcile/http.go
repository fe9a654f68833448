package reconcile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/hookledger/hookledger/redact"
)

// Retry bounds how hard a source retries one request. 429 (waiting as long as
// Retry-After says), 5xx and network errors are retried with exponential
// backoff; any other status is final. Zero fields take the defaults.
type Retry struct {
	MaxTries        uint          // attempts in all; default 6
	InitialInterval time.Duration // first backoff; default 500ms
	MaxInterval     time.Duration // backoff ceiling; default 30s
	MaxElapsed      time.Duration // give up after this long; default 2m
	// MaxRetryAfter is the longest Retry-After honoured; a provider asking
	// for a longer wait ends the run (the checkpoint stays) instead of
	// holding it for that long. Default 2m.
	MaxRetryAfter time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.MaxTries == 0 {
		r.MaxTries = 6
	}
	if r.InitialInterval == 0 {
		r.InitialInterval = 500 * time.Millisecond
	}
	if r.MaxInterval == 0 {
		r.MaxInterval = 30 * time.Second
	}
	if r.MaxElapsed == 0 {
		r.MaxElapsed = 2 * time.Minute
	}
	if r.MaxRetryAfter == 0 {
		r.MaxRetryAfter = 2 * time.Minute
	}
	return r
}

// Client is the HTTP side of the API sources: a base URL, a bearer token and
// one retry policy for every request.
type Client struct {
	HTTP    *http.Client // default: a client with a 30 s timeout
	BaseURL string
	Token   string      // sent as "Authorization: Bearer"; never logged or put in errors
	Header  http.Header // added to every request
	Retry   Retry
	// RequestIDHeader names the response header with the provider's request id.
	RequestIDHeader string
}

// StatusError is a final (or last retried) non-2xx answer.
type StatusError struct {
	Method, Path string
	Code         int
	Body         string // the start of the response body
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Code, http.StatusText(e.Code))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

type response struct {
	Code      int
	Header    http.Header
	Body      []byte
	RequestID string
}

// maxResponse bounds what one API answer may hold (a page of 100 events).
const maxResponse = 32 << 20

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

// do sends one request, retrying as Retry says. q may be nil.
func (c *Client) do(ctx context.Context, method, path string, q url.Values) (*response, error) {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	r := c.Retry.withDefaults()
	b := &backoff.ExponentialBackOff{
		InitialInterval:     r.InitialInterval,
		RandomizationFactor: backoff.DefaultRandomizationFactor,
		Multiplier:          backoff.DefaultMultiplier,
		MaxInterval:         r.MaxInterval,
	}
	op := func() (*response, error) {
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return nil, backoff.Permanent(err)
		}
		for k, vs := range c.Header {
			req.Header[k] = vs
		}
		if c.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		req.Header.Set("User-Agent", "hookledger-reconcile")
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, backoff.Permanent(ctx.Err())
			}
			return nil, fmt.Errorf("%s %s: %w", method, path, stripURL(err))
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
		if err != nil {
			return nil, fmt.Errorf("%s %s: read response: %w", method, path, err)
		}
		if len(body) > maxResponse {
			return nil, backoff.Permanent(fmt.Errorf("%s %s: response larger than %d bytes", method, path, maxResponse))
		}
		res := &response{Code: resp.StatusCode, Header: resp.Header, Body: body}
		if c.RequestIDHeader != "" {
			res.RequestID = resp.Header.Get(c.RequestIDHeader)
		}
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			return res, nil
		}
		serr := &StatusError{Method: method, Path: path, Code: resp.StatusCode, Body: c.snippet(body)}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			if wait, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				if wait > r.MaxRetryAfter {
					return nil, backoff.Permanent(fmt.Errorf("%w (asked to retry after %s, longer than the %s this run waits)",
						serr, wait, r.MaxRetryAfter))
				}
				return nil, errors.Join(serr, &backoff.RetryAfterError{Duration: wait})
			}
			return nil, serr
		}
		return nil, backoff.Permanent(serr)
	}
	return backoff.Retry(ctx, op, backoff.WithBackOff(b), backoff.WithMaxTries(r.MaxTries), backoff.WithMaxElapsedTime(r.MaxElapsed))
}

// retryAfter reads Retry-After: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// snippet is the start of an error body, for messages, without the token:
// an API, or a proxy in front of it, may answer with the request quoted back
// (redact says in which forms). Scrubbed before it is cut, so a token that
// straddles the cut goes whole.
func (c *Client) snippet(b []byte) string {
	b = redact.New(c.Token).Bytes(bytes.TrimSpace(b))
	if len(b) > 300 {
		b = append(b[:300:300], "…"...)
	}
	return string(b)
}

// stripURL drops the URL from a transport error: the query may carry cursors
// that make messages long, and the path is already in the message.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
