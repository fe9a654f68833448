package forward

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
	"golang.org/x/time/rate"
)

// PushStore is what the Stripe destination reads (*schema.DB).
type PushStore interface {
	StripePushesOf(ctx context.Context, ids []int64) (map[int64]schema.StripePush, error)
	StripeSendOf(ctx context.Context, identifier string) (schema.StripeSend, bool, error)
	DeliveredSends(ctx context.Context, identifiers []string) (map[string]bool, error)
	StripeInvoicePushesOf(ctx context.Context, ids []int64) (map[int64]schema.StripeInvoicePush, error)
	LatestExternalIDs(ctx context.Context, customer string) (string, error)
}

// stripeBatch is how many pushes one claim of the Stripe destination takes.
const stripeBatch = 4096

// stripeDestinations are the workers of Stripe: the outbox machinery of
// every destination (claims, leases, backoff, dead, pause, retry), with
// calls to Stripe's API instead of a signed POST as their attempts. One
// sends the meter pushes; with stripe.invoices, another the invoices, so a
// slow invoice never holds a meter event back.
func (r *Relay) stripeDestinations() ([]*destination, error) {
	if r.Pushes == nil {
		return nil, fmt.Errorf("stripe: the relay has no push store")
	}
	if r.Stripe.APIKey.Value == "" {
		return nil, fmt.Errorf("stripe: api_key is not set")
	}
	client := &stripe.Client{Base: r.Stripe.APIBase, Key: r.Stripe.APIKey.Value, HTTP: r.Client, UserAgent: r.UserAgent}
	// One rate limit for both: stripe.rate_limit caps the calls to Stripe,
	// meter events and invoices together.
	var limiter *rate.Limiter
	if rl := r.Stripe.RateLimit; rl != nil {
		limiter = newLimiter(rl)
	}
	worker := func(c config.Destination) *destination {
		return &destination{relay: r, cfg: c, kick: make(chan struct{}, 1), stripe: client, secrets: client.Secrets(), limiter: limiter}
	}
	// A claim takes what a busy second gathers: its pushes go as one meter
	// event per customer and meter (Plan), then the worker waits an
	// interval.
	pushes := worker(r.Stripe.Destination())
	pushes.batch, pushes.linger, pushes.paced, pushes.deliverAll = stripeBatch, r.Stripe.Interval.Duration, true, pushes.deliverPushes
	ds := []*destination{pushes}
	if r.Stripe.InvoicesOn() {
		invoices := worker(r.Stripe.InvoicesDestination())
		invoices.deliverAll = invoices.deliverInvoices
		ds = append(ds, invoices)
	}
	return ds, nil
}

// deliverPushes attempts claimed pushes as stripe.Plan groups them: the
// pushes of one customer, meter and period pending together go as one meter
// event, and every send new to this batch is stored before its request
// (planSends), so a retry or a restart sends the same event under the same
// identifier. Stripe takes one call at a time per customer and meter: the
// sends of one pair go one after another, the pairs Concurrency at a time.
func (d *destination) deliverPushes(ctx context.Context, claims []schema.OutboxClaim, ids []int64, rec *record) *record {
	r := d.relay
	release := func(what string, err error) *record {
		rec.released = ids // try again later
		r.Log.Warn("forward", "destination", d.cfg.Name, "error", what+": "+err.Error())
		rec.finish(d, r.Now())
		return rec
	}
	pushes, err := r.Pushes.StripePushesOf(ctx, ids)
	if err != nil {
		return release("read pushes", err)
	}
	outs := make([]outcome, len(claims))
	times := make([]time.Time, len(claims))
	claimOf := make(map[int64]int, len(claims)) // push id → claim
	claimed := make([]schema.StripePush, 0, len(claims))
	for i, c := range claims {
		p, ok := pushes[c.ID]
		if !ok {
			outs[i], times[i] = outcome{err: "push not found"}, r.Now()
			continue
		}
		claimOf[p.ID] = i
		claimed = append(claimed, p)
	}
	pairs, err := stripe.Plan(claimed, r.Now())
	if err != nil {
		return release("plan sends", err)
	}
	if plan := newPlan(pairs, r.Now()); plan != nil {
		if err := r.Writer.Submit(context.WithoutCancel(ctx), plan); err != nil {
			return release("store sends", err)
		}
	}
	// A stored send one of whose pushes was delivered reached Stripe: the
	// pushes of it claimed now (retried apart from the rest of their sum)
	// are settled without a request, which Stripe, past its 24 hours of
	// identifiers, would count a second time.
	var stored []string
	for _, sends := range pairs {
		for _, s := range sends {
			if !s.New {
				stored = append(stored, s.Identifier)
			}
		}
	}
	took, err := r.Pushes.DeliveredSends(ctx, stored)
	if err != nil {
		return release("read sends", err)
	}
	sem := make(chan struct{}, d.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, sends := range pairs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, s := range sends {
				o, at := outcome{canceled: true}, r.Now()
				switch {
				case took[s.Identifier]:
					o = outcome{acked: true}
				case d.limiter == nil || d.limiter.Wait(ctx) == nil:
					at = r.Now()
					o = d.send(ctx, s)
				}
				for _, p := range s.Pushes {
					outs[claimOf[p.ID]], times[claimOf[p.ID]] = o, at
				}
			}
		}()
	}
	wg.Wait()
	return rec.settle(d, claims, outs, times)
}

// planSends is the op that stores a batch's new sends, and the new time of
// the sends Stripe's window passed, before their requests.
type planSends struct {
	sends []stripe.Send
	now   int64
}

// newPlan is the op storing what pairs changed, nil when nothing did.
func newPlan(pairs [][]stripe.Send, now time.Time) *planSends {
	plan := &planSends{now: now.UnixMilli()}
	for _, sends := range pairs {
		for _, s := range sends {
			if s.New || s.Restamp {
				plan.sends = append(plan.sends, s)
			}
		}
	}
	if len(plan.sends) == 0 {
		return nil
	}
	return plan
}

// Apply implements custody.Op.
func (p *planSends) Apply(ctx context.Context, tx *custody.Tx) error {
	b := tx.Stripe()
	for _, s := range p.sends {
		var err error
		if s.New {
			err = b.InsertStripeSend(ctx, s.StripeSend, s.IDs(), p.now)
		} else {
			err = b.RestampStripeSend(ctx, s.Identifier, s.Timestamp)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// send makes one request: a meter event, or a cancel. A push whose customer
// has no Stripe customer is dead with the reason (link it, then stripe
// retry). A send's time is inside Stripe's window: Plan stamps a push
// outside it with the time it is sent (carried).
//
// A cancel (a void within Stripe's 24 hours, stripe.Sync.Row) is sent as a
// meter event adjustment, under the push's identifier as its idempotency
// key, when the push it cancels was sent alone. When that push went out in
// a sum with others, or Stripe refuses the cancel (400: the 24 hours have
// passed, or it never received the event), the push is sent as the
// compensating value instead: both take the same whole number off
// Stripe's sum.
func (d *destination) send(ctx context.Context, s stripe.Send) outcome {
	p := s.Pushes[0]
	if s.Cancel() {
		target, sent, err := d.relay.Pushes.StripeSendOf(ctx, p.Cancels)
		if err != nil {
			return outcome{err: "read the send of " + p.Cancels + ": " + err.Error()}
		}
		// A push sent before sends were stored (migration 0027) went alone.
		if !sent || target.Count == 1 {
			tctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout.Duration)
			res := d.stripe.CancelMeterEvent(tctx, p.EventName, p.Cancels, p.Identifier)
			cancel()
			if !res.Permanent || res.Status != http.StatusBadRequest {
				return d.outcomeOf(ctx, res)
			}
			d.relay.Log.Info("forward", "destination", d.cfg.Name, "push", p.Identifier,
				"note", "Stripe refused the cancel of "+p.Cancels+" ("+res.Err+"): sending the compensating value")
		}
	}
	customer := p.StripeCustomer
	if customer == "" {
		var err error
		if customer, err = d.linked(ctx, p.CustomerID); err != nil {
			return outcome{err: err.Error()}
		}
		if customer == "" {
			return outcome{err: fmt.Sprintf("customer %q has no Stripe customer: hookledger customers link %s --stripe cus_…, then hookledger stripe retry",
				p.CustomerID, p.CustomerID), permanent: true}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout.Duration)
	defer cancel()
	return d.outcomeOf(ctx, d.stripe.SendMeterEvent(ctx, stripe.MeterEvent{EventName: p.EventName, Identifier: s.Identifier, Customer: customer,
		Value: s.Value, Timestamp: s.Timestamp}))
}

// outcomeOf is what Stripe's answer res means for the push: a transport
// error while the relay stops is a cancelled attempt, not a failure.
func (d *destination) outcomeOf(ctx context.Context, res stripe.Result) outcome {
	o := outcome{status: res.Status, latency: res.Latency, response: res.Body, err: res.Err, retryAfter: res.RetryAfter,
		acked: res.Duplicate, permanent: res.Permanent}
	if res.Status == 0 && res.Err != "" {
		o.canceled = d.relay.stopping(ctx)
	}
	return o
}

// linked is the Stripe customer the registry links customer to (customers
// link), "" when none.
func (d *destination) linked(ctx context.Context, customer string) (string, error) {
	ext, err := d.relay.Pushes.LatestExternalIDs(ctx, customer)
	if err != nil || ext == "" {
		return "", err
	}
	id, err := stripe.CustomerOf(ext)
	if err != nil {
		return "", fmt.Errorf("customer %q: %w", customer, err)
	}
	return id, nil
}
