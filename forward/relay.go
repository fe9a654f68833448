// Package forward is the relay that delivers the forwarding outbox: every
// accepted event that matches a destination has an outbox row committed with
// its receipt (custody), and the relay POSTs it, signed the Standard Webhooks
// way, until the destination answers 2xx or the message is dead. It delivers
// at least once under a stable webhook-id; the application dedupes on it.
//
// Each destination has its own worker, so a slow or failing one delays only
// itself. Its writes (the claim of a batch, the outcome of its attempts, the
// destination's backoff) are Ops submitted to custody's Writer: one writer
// owns the write connection, and the relay's writes share its group commits
// with the webhooks.
package forward

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/redact"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

// Store is what the relay reads from storage (the read pool); *schema.DB
// satisfies it.
type Store interface {
	DestinationState(ctx context.Context, name string) (schema.DestinationState, error)
	NextDue(ctx context.Context, destination string) (at int64, ok bool, err error)
	OutboxBodies(ctx context.Context, ids []int64) (map[int64]schema.OutboxBody, error)
}

// Submitter runs an Op in the writer's transaction (*custody.Writer).
type Submitter interface {
	Submit(ctx context.Context, op custody.Op) error
}

// Attempt is one finished attempt, for metrics.
type Attempt struct {
	Destination string
	Outcome     string // delivered, retry or dead
	Latency     time.Duration
}

// Attempt outcomes.
const (
	OutcomeDelivered = "delivered"
	OutcomeRetry     = "retry"
	OutcomeDead      = "dead"
)

// Relay delivers the outbox of the configured destinations. Set the fields,
// then Open; Close before the writer closes.
type Relay struct {
	DB           Store
	Writer       Submitter
	Destinations []config.Destination
	// Client sends the requests; default one with keep-alive and no
	// redirects followed (a redirect is not a delivery).
	Client *http.Client
	// Now is the clock. Default time.Now.
	Now func() time.Time
	Log *slog.Logger
	// Observe, when set, is called after each attempt (metrics).
	Observe func(Attempt)
	// ObserveLimit, when set, is called with a destination's concurrency
	// limit (adaptive.go) when the relay opens and after each batch
	// (metrics).
	ObserveLimit func(destination string, limit int)
	// BatchSize is how many due messages one claim takes. Default 256.
	BatchSize int
	// Linger is how long a worker waits after a batch that was not full
	// before it claims again, kicks or not: under steady traffic messages
	// then leave in batches (two writer ops per batch) instead of one or two
	// at a time, which would cost the webhooks' writer a commit each. A
	// lone event still leaves at once. Default 100ms.
	Linger time.Duration
	// Poll is how often an idle worker looks for due messages without being
	// kicked (a retry coming due, a pause lifted by another process).
	// Default 1s.
	Poll time.Duration
	// Busy, when set, reports whether the receiver is taking webhooks as
	// fast as it can commit them (serve: the writer has a queue). While it
	// is, a worker holds new messages back for up to YieldFor, so a burst
	// of webhooks is answered first and forwarded right after: both share
	// the machine, and a sender that is not answered retries, while a
	// forwarded message only arrives later. A message due YieldFor ago is
	// sent however busy the receiver is, so under sustained load messages
	// still flow, YieldFor late.
	Busy     func() bool
	YieldFor time.Duration
	// UserAgent is sent with every request. Default "hookledger".
	UserAgent string
	// Sole says this relay is the only one on the database (serve on
	// SQLite holds the data directory's lock): Open then releases the claims
	// a relay killed mid-attempt left, instead of waiting for their leases.
	Sole bool
	// Stripe, when set, adds the destination of Stripe pushes
	// (config.StripeDestination; stripe.go), read from Pushes.
	Stripe *config.Stripe
	Pushes PushStore

	dests  []*destination
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// destination is one destination's worker.
type destination struct {
	relay   *Relay
	cfg     config.Destination
	signer  *Signer
	secrets *redact.Secrets // what its requests send: scrubbed from what record stores
	limiter *rate.Limiter   // nil: no rate limit
	stripe  *stripe.Client  // set for Stripe's destinations: they send pushes and invoices, not events
	// deliverAll, when set, attempts a claimed batch instead of POSTing events
	// (Stripe's destinations: deliverPushes, deliverInvoices).
	deliverAll func(ctx context.Context, claims []schema.OutboxClaim, ids []int64, rec *record) *record
	limit      *adaptive // requests in flight, concurrency to max_concurrency; nil for Stripe (its own, fixed)
	kick       chan struct{}
	held       bool // the last step found the destination paused or backed off (the worker's own)
	// batch is how many due messages one claim takes, linger how long the
	// worker waits after a batch that was not full (Relay's BatchSize and
	// Linger; the Stripe destination's are its own).
	batch  int
	linger time.Duration
	// paced: the linger counts from the batch's start, not its end (Stripe's
	// interval: a customer and meter are pushed at most once a linger,
	// and a batch that took longer than one waits no more).
	paced bool
	// lingering: the last step ended in a linger, which kicks do not cut.
	lingering bool
}

// Open starts one worker per destination.
func (r *Relay) Open(ctx context.Context) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Log == nil {
		r.Log = slog.Default()
	}
	if r.BatchSize <= 0 {
		r.BatchSize = 256
	}
	if r.Poll <= 0 {
		r.Poll = time.Second
	}
	if r.Linger <= 0 {
		r.Linger = 100 * time.Millisecond
	}
	if r.UserAgent == "" {
		r.UserAgent = "hookledger"
	}
	if r.Client == nil {
		r.Client = DefaultClient()
	}
	for _, c := range r.Destinations {
		secrets := make([]string, len(c.Secrets))
		for i, s := range c.Secrets {
			secrets[i] = s.Value
		}
		signer, err := NewSigner(secrets)
		if err != nil {
			return fmt.Errorf("destination %s: %w", c.Name, err)
		}
		d := &destination{relay: r, cfg: c, signer: signer, secrets: destinationSecrets(c), kick: make(chan struct{}, 1),
			limit: newAdaptive(c.Concurrency, c.MaxConcurrency)}
		if c.RateLimit != nil {
			d.limiter = newLimiter(c.RateLimit)
		}
		r.dests = append(r.dests, d)
	}
	if r.Stripe != nil {
		ds, err := r.stripeDestinations()
		if err != nil {
			return err
		}
		r.dests = append(r.dests, ds...)
	}
	// A state row per destination, so status lists a destination later
	// removed from the config, with the messages it kept.
	if len(r.dests) > 0 {
		now := r.Now().UnixMilli()
		if err := r.Writer.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
			for _, d := range r.dests {
				if err := tx.Outbox().EnsureDestination(ctx, d.cfg.Name, now); err != nil {
					return err
				}
			}
			if r.Sole {
				for _, d := range r.dests {
					if _, err := tx.Outbox().ReleaseClaims(ctx, d.cfg.Name, now); err != nil {
						return err
					}
				}
			}
			return nil
		})); err != nil {
			return fmt.Errorf("forward: %w", err)
		}
	}
	for _, d := range r.dests {
		d.batch, d.linger = cmp.Or(d.batch, r.BatchSize), cmp.Or(d.linger, r.Linger)
	}
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, d := range r.dests {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			d.run(ctx)
		}()
		if d.limit == nil {
			r.Log.Info("forwarding", "destination", d.cfg.Name, "concurrency", d.cfg.Concurrency)
			continue
		}
		r.Log.Info("forwarding", "destination", d.cfg.Name, "concurrency", d.limit.floor, "max_concurrency", d.limit.ceiling)
		d.observeLimit()
	}
	return nil
}

// observeLimit reports the destination's concurrency limit.
func (d *destination) observeLimit() {
	if d.relay.ObserveLimit != nil && d.limit != nil {
		d.relay.ObserveLimit(d.cfg.Name, d.limit.Limit())
	}
}

func newLimiter(rl *config.RateLimit) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(rl.PerSecond), rl.Burst)
}

// Kick tells every worker that new messages may be due (the writer committed
// a batch), so a new event leaves within one round trip instead of a poll.
func (r *Relay) Kick() {
	for _, d := range r.dests {
		select {
		case d.kick <- struct{}{}:
		default:
		}
	}
}

// Close stops the workers: requests in flight are abandoned and their
// messages released (due again at once, no attempt counted), and every
// outcome already known is recorded before Close returns. The writer must
// still be open.
func (r *Relay) Close() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.wg.Wait()
	r.cancel = nil
}

// stopping reports whether an attempt failed because the relay is closing.
func (r *Relay) stopping(attemptCtx context.Context) bool {
	return errors.Is(context.Cause(attemptCtx), context.Canceled)
}

// DefaultClient is the relay's HTTP client: pooled keep-alive connections,
// a dial timeout, and redirects not followed.
func DefaultClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// run is the worker's loop: deliver what is due, then wait for a kick, the
// next due time or the poll interval.
func (d *destination) run(ctx context.Context) {
	for {
		wait, err := d.step(ctx)
		held := d.held // paused or backed off: new messages wait too
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			d.relay.Log.Warn("forward", "destination", d.cfg.Name, "error", err.Error())
			wait = d.relay.Poll
		}
		if wait <= 0 {
			continue
		}
		t := time.NewTimer(wait)
		kick := d.kick
		if d.lingering || held {
			kick = nil // let the next batch fill, or the backoff run out
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// step delivers one batch if one is due and returns how long to wait before
// the next.
func (d *destination) step(ctx context.Context) (time.Duration, error) {
	r := d.relay
	began := time.Now()
	d.lingering = false
	st, err := r.DB.DestinationState(ctx, d.cfg.Name)
	if err != nil {
		return 0, fmt.Errorf("read state: %w", err)
	}
	now := r.Now()
	d.held = true
	if st.Paused {
		return r.Poll, nil
	}
	if until := time.UnixMilli(st.BackoffUntil); until.After(now) {
		return min(until.Sub(now), r.Poll), nil // a resume or retry elsewhere ends it early
	}
	d.held = false
	due, ok, err := r.DB.NextDue(ctx, d.cfg.Name)
	if err != nil {
		return 0, fmt.Errorf("next due: %w", err)
	}
	if !ok {
		return r.Poll, nil
	}
	probe := false
	if at := time.UnixMilli(due); at.After(now) {
		// The destination is down, its backoff is over, and the message
		// due first would leave it unprobed for more than
		// maxProbeInterval since its last attempt (UpdatedAt): that
		// message goes now, early, as the destination's probe, so delivery
		// resumes within about a minute of the application's recovery
		// rather than after the messages' own, longer, backoff.
		if st.Failures == 0 || !at.After(time.UnixMilli(st.UpdatedAt).Add(maxProbeInterval)) {
			return min(at.Sub(now), r.Poll), nil
		}
		probe = true
	} else if r.Busy != nil && !d.paced && now.Sub(at) < r.YieldFor && r.Busy() {
		d.lingering = true
		return r.Linger, nil // the receiver first; the oldest message has waited less than YieldFor
	}
	// While the destination fails, one message probes it; the rest wait,
	// so a destination that is down is not hammered with the whole backlog.
	limit := d.batch
	if st.Failures > 0 {
		limit = 1
	}
	claims, until, err := d.claim(ctx, now, limit, probe)
	if err != nil || len(claims) == 0 {
		return r.Poll, err
	}
	stop := d.hold(ctx, claims, until)
	results := d.deliver(ctx, claims, st)
	stop()
	if err := r.Writer.Submit(context.WithoutCancel(ctx), results); err != nil {
		// The claims' leases end and they are attempted again: at least
		// once, never lost.
		return 0, fmt.Errorf("record attempts: %w", err)
	}
	results.observe(r.Observe)
	d.observeLimit()
	if len(claims) < limit {
		d.lingering = true
		if d.paced {
			return max(d.linger-time.Since(began), time.Millisecond), nil
		}
		return d.linger, nil
	}
	return 0, nil
}

// deliver attempts every claimed message, as many at a time as the
// destination's limit lets out (adaptive.go), and returns the op that
// records what happened.
func (d *destination) deliver(ctx context.Context, claims []schema.OutboxClaim, st schema.DestinationState) *record {
	r := d.relay
	ids := make([]int64, len(claims))
	for i, c := range claims {
		ids[i] = c.ID
	}
	rec := &record{dest: d.cfg.Name, state: st}
	if d.deliverAll != nil {
		return d.deliverAll(ctx, claims, ids, rec)
	}
	bodies, err := r.DB.OutboxBodies(ctx, ids)
	if err != nil {
		rec.released = ids // try again later
		r.Log.Warn("forward", "destination", d.cfg.Name, "error", "read bodies: "+err.Error())
		rec.finish(d, r.Now())
		return rec
	}
	outs := make([]outcome, len(claims))
	times := make([]time.Time, len(claims))
	var wg sync.WaitGroup
	for i, c := range claims {
		ev, found := bodies[c.ID]
		switch {
		case !found:
			outs[i], times[i] = outcome{err: "receipt not found"}, r.Now()
			continue
		case ev.Pruned:
			outs[i], times[i] = outcome{err: "the receipt's body was pruned"}, r.Now()
			continue
		}
		if d.limiter != nil {
			if err := d.limiter.Wait(ctx); err != nil {
				outs[i] = outcome{canceled: true}
				continue
			}
		}
		if err := d.limit.acquire(ctx); err != nil {
			outs[i] = outcome{canceled: true}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := time.Now()
			times[i] = r.Now()
			o := d.attempt(ctx, c, ev, times[i])
			outs[i] = o
			d.limit.release(sent, !o.canceled, o.ok(), o.latency)
		}()
	}
	wg.Wait()
	return rec.settle(d, claims, outs, times)
}

// record is the op that stores a batch's attempts, their messages' new
// status and the destination's backoff, in one transaction.
type record struct {
	// also, when set, writes what the batch's answers said beside its
	// outcomes, in their transaction (Stripe's invoices: saveInvoices).
	also     custody.Op
	dest     string
	state    schema.DestinationState // as the batch began; finish updates it
	results  []schema.OutboxResult
	released []int64
	observed []Attempt
	anyOK    bool
	lastErr  string
	wait     time.Duration // the longest Retry-After the batch was given
	at       int64
	// resumeAfter, when set, is the first delivery after a failure streak:
	// the messages that would wait past it (unix ms) are due at once
	// (schema.Batch.ResumeOutbox).
	resumeAfter int64
}

// add is the one way an attempt reaches the database: what the destination
// answered and the error are scrubbed here of every secret the request
// carried (redact), before anything of them is stored.
func (rec *record) add(d *destination, c schema.OutboxClaim, o outcome, at time.Time) {
	sent := o.sent
	if sent == nil {
		sent = d.secrets
	}
	o.response, o.err = sent.Cut(o.response, responseKeep), sent.String(o.err)
	res := schema.OutboxResult{ID: c.ID, AttemptedAt: at.UnixMilli(), StatusCode: o.status, LatencyMS: o.latency.Milliseconds(),
		Response: o.response, Error: o.err}
	attempts := c.Attempts + 1
	outcome := OutcomeRetry
	switch {
	case o.ok():
		res.Status, res.NextAttemptAt, outcome = schema.OutboxDelivered, res.AttemptedAt, OutcomeDelivered
		rec.anyOK = true
	case o.permanent:
		// Refused for good (a push Stripe cannot take): dead now, with
		// the reason. The destination answered, so it is not backed off.
		res.Status, res.NextAttemptAt, outcome = schema.OutboxDead, res.AttemptedAt, OutcomeDead
		rec.anyOK = true
	case c.Due > res.AttemptedAt:
		// A probe sent before the message was due failed: the destination
		// is still down, which says nothing new about the message. It keeps
		// its own next attempt and its count towards max_attempts, so
		// probing a minute apart does not use up its attempts.
		res.Status, res.NextAttemptAt, res.Probe = schema.OutboxPending, c.Due, true
		res.Error = "probe: " + o.err
		rec.lastErr, rec.wait = o.err, max(rec.wait, o.retryAfter)
	case attempts >= d.cfg.MaxAttempts || at.Sub(time.UnixMilli(c.PendingSince)) >= d.cfg.MaxAge.Duration:
		res.Status, res.NextAttemptAt, outcome = schema.OutboxDead, res.AttemptedAt, OutcomeDead
		rec.lastErr = o.err
	default:
		wait := max(delay(d.cfg, attempts), o.retryAfter)
		res.Status, res.NextAttemptAt = schema.OutboxPending, at.Add(wait).UnixMilli()
		rec.lastErr, rec.wait = o.err, max(rec.wait, o.retryAfter)
	}
	rec.results = append(rec.results, res)
	rec.observed = append(rec.observed, Attempt{Destination: d.cfg.Name, Outcome: outcome, Latency: o.latency})
}

// settle records the outcome of each claim (outs[i] at times[i]): a claim
// whose attempt the closing relay abandoned is released, due again with no
// attempt counted; then finish decides the destination's backoff.
func (rec *record) settle(d *destination, claims []schema.OutboxClaim, outs []outcome, times []time.Time) *record {
	for i, c := range claims {
		if outs[i].canceled {
			rec.released = append(rec.released, c.ID)
			continue
		}
		rec.add(d, c, outs[i], times[i])
	}
	rec.finish(d, d.relay.Now())
	return rec
}

// finish decides the destination's backoff: a batch in which nothing was
// delivered is one more failure in a row, and the destination as a whole
// waits (probeDelay, or as long as it asked with Retry-After) before the
// next probe; one delivery ends the streak, and the backlog the streak
// built is due at once.
func (rec *record) finish(d *destination, at time.Time) {
	rec.at = at.UnixMilli()
	switch {
	case len(rec.results) == 0:
	case rec.anyOK:
		if rec.state.Failures > 0 {
			// Past two leases: never a message another relay holds.
			rec.resumeAfter = at.Add(2 * d.lease()).UnixMilli()
		}
		rec.state.Failures, rec.state.BackoffUntil, rec.state.LastError = 0, 0, ""
	default:
		rec.state.Failures++
		wait := max(probeDelay(d.cfg, rec.state.Failures), rec.wait)
		rec.state.BackoffUntil, rec.state.LastError = at.Add(wait).UnixMilli(), rec.lastErr
	}
}

// Apply implements custody.Op.
func (rec *record) Apply(ctx context.Context, tx *custody.Tx) error {
	if rec.also != nil {
		if err := rec.also.Apply(ctx, tx); err != nil {
			return err
		}
	}
	b := tx.Outbox()
	if err := b.RecordOutboxResults(ctx, rec.results); err != nil {
		return err
	}
	if err := b.ReleaseOutbox(ctx, rec.released, rec.at); err != nil {
		return err
	}
	if len(rec.results) == 0 {
		return nil
	}
	if rec.resumeAfter != 0 {
		if _, err := b.ResumeOutbox(ctx, rec.dest, rec.at, rec.resumeAfter); err != nil {
			return err
		}
	}
	st := rec.state
	st.Name, st.UpdatedAt = rec.dest, rec.at
	return b.SaveBackoff(ctx, st)
}

// observe reports the batch's attempts once they are recorded.
func (rec *record) observe(fn func(Attempt)) {
	if fn == nil {
		return
	}
	for _, a := range rec.observed {
		fn(a)
	}
}
