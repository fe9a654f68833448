package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/redact"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/scheme"
)

// Headers hookledger adds to a forwarded event, beside the Standard Webhooks
// webhook-id, webhook-timestamp and webhook-signature.
const (
	HeaderProvider  = "X-Hookledger-Provider"
	HeaderEventType = "X-Hookledger-Event-Type"
	HeaderEventID   = "X-Hookledger-Event-Id"
	HeaderAttempt   = "X-Hookledger-Attempt"
)

// responseKeep is how much of a response body an attempt records.
const responseKeep = 1 << 10

// maxRetryAfter bounds a destination's Retry-After: a typo of a year must not
// park a destination for good.
const maxRetryAfter = 24 * time.Hour

// Signer signs forwarded messages with a destination's secrets, the
// Standard Webhooks way: every secret's signature in one webhook-signature
// header, so an application verifying with either side of a rotation
// accepts it.
type Signer struct {
	keys [][]byte
	std  scheme.Scheme
}

// NewSigner decodes secrets (whsec_…).
func NewSigner(secrets []string) (*Signer, error) {
	std, err := scheme.New("standard", scheme.HMACOptions{})
	if err != nil {
		return nil, err
	}
	s := &Signer{std: std}
	for _, sec := range secrets {
		k, err := std.Key(sec)
		if err != nil {
			return nil, err
		}
		s.keys = append(s.keys, k)
	}
	if len(s.keys) == 0 {
		return nil, errors.New("no signing secret")
	}
	return s, nil
}

// Sign sets webhook-id, webhook-timestamp and webhook-signature on h for body.
func (s *Signer) Sign(h http.Header, messageID string, body []byte, now time.Time) {
	s.std.Sign(h, body, s.keys[0], messageID, "", now) // id, timestamp and the first signature
	if len(s.keys) == 1 {
		return
	}
	sigs := []string{h.Get("Webhook-Signature")}
	for _, k := range s.keys[1:] {
		one := http.Header{}
		s.std.Sign(one, body, k, messageID, "", now) // the same second: the same timestamp
		sigs = append(sigs, one.Get("Webhook-Signature"))
	}
	h.Set("Webhook-Signature", strings.Join(sigs, " "))
}

// outcome is what one attempt found.
type outcome struct {
	status     int
	latency    time.Duration
	response   []byte // up to responseKeep plus the Slack of sent: record.add scrubs and cuts it
	sent       *redact.Secrets
	err        string
	retryAfter time.Duration // 0: none given
	canceled   bool          // the relay stopped: no outcome
	acked      bool          // delivered before: the destination said it has the message (Stripe's duplicate answer)
	permanent  bool          // refused for good: dead at once, with the reason (a push Stripe cannot take)
}

func (o outcome) ok() bool { return o.acked || (o.status >= 200 && o.status < 300 && o.err == "") }

// attempt POSTs one message and reports what happened; it never fails.
func (d *destination) attempt(ctx context.Context, m schema.OutboxClaim, ev schema.OutboxBody, now time.Time) outcome {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout.Duration)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.cfg.URL, bytes.NewReader(ev.Body))
	if err != nil {
		return outcome{err: err.Error()}
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", d.relay.UserAgent)
	h.Set(HeaderProvider, ev.Provider)
	h.Set(HeaderEventType, ev.EventType)
	h.Set(HeaderEventID, ev.EventID)
	h.Set(HeaderAttempt, strconv.Itoa(m.Attempts+1))
	d.signer.Sign(h, m.MessageID, ev.Body, now)
	// The signatures are derived from the secrets, and are this request's
	// alone: an echo of them is scrubbed with the destination's secrets.
	var sigs []string
	for _, sig := range strings.Fields(h.Get("Webhook-Signature")) {
		_, v, _ := strings.Cut(sig, ",") // v1,<base64>
		sigs = append(sigs, v)
	}
	sent := d.secrets.With(sigs...)
	start := time.Now()
	resp, err := d.relay.Client.Do(req)
	if err != nil {
		o := outcome{latency: time.Since(start), err: attemptError(ctx, err, d.cfg.Timeout.Duration), sent: sent}
		o.canceled = d.relay.stopping(ctx)
		return o
	}
	defer resp.Body.Close()
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, int64(responseKeep+sent.Slack())))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	o := outcome{status: resp.StatusCode, latency: time.Since(start), response: body, sent: sent}
	if rerr != nil && o.ok() {
		// A 2xx whose body broke off still said 2xx: the application
		// has the event.
		rerr = nil
	}
	if !o.ok() {
		o.err = fmt.Sprintf("HTTP %d", resp.StatusCode)
		if rerr != nil {
			o.err += ": " + rerr.Error()
		}
		o.retryAfter = retryAfter(resp.Header.Get("Retry-After"), now)
	}
	return o
}

// attemptError names what went wrong without the URL (it may carry
// credentials) when it can.
func attemptError(ctx context.Context, err error, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("timeout after %s", timeout)
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		return ue.Unwrap().Error()
	}
	return err.Error()
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 0 {
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}
