package forward

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

// PushStore is what the Stripe destination reads (*schema.DB).
type PushStore interface {
	StripePushesOf(ctx context.Context, ids []int64) (map[int64]schema.StripePush, error)
	LatestExternalIDs(ctx context.Context, customer string) (string, error)
}

// stripeDestination is the worker of Stripe pushes: the outbox machinery
// of every destination (claims, leases, backoff, dead, pause, retry), with
// a meter event instead of a signed POST as its attempt.
func (r *Relay) stripeDestination() (*destination, error) {
	if r.Pushes == nil {
		return nil, fmt.Errorf("stripe: the relay has no push store")
	}
	if r.Stripe.APIKey.Value == "" {
		return nil, fmt.Errorf("stripe: api_key is not set")
	}
	c := r.Stripe.Destination()
	client := &stripe.Client{Base: r.Stripe.APIBase, Key: r.Stripe.APIKey.Value, HTTP: r.Client, UserAgent: r.UserAgent}
	d := &destination{relay: r, cfg: c, kick: make(chan struct{}, 1), stripe: client, secrets: client.Secrets()}
	if c.RateLimit != nil {
		d.limiter = newLimiter(c.RateLimit)
	}
	return d, nil
}

// deliverPushes attempts claimed pushes. Stripe takes one call at a time per
// customer and meter: the pushes of one pair go one after another, the
// pairs Concurrency at a time.
func (d *destination) deliverPushes(ctx context.Context, claims []schema.OutboxClaim, ids []int64, rec *record) *record {
	r := d.relay
	pushes, err := r.Pushes.StripePushesOf(ctx, ids)
	if err != nil {
		rec.released = ids
		r.Log.Warn("forward", "destination", d.cfg.Name, "error", "read pushes: "+err.Error())
		rec.finish(d, r.Now())
		return rec
	}
	outs := make([]outcome, len(claims))
	times := make([]time.Time, len(claims))
	groups := map[[2]string][]int{}
	var order [][2]string
	for i, c := range claims {
		p, ok := pushes[c.ID]
		if !ok {
			outs[i], times[i] = outcome{err: "push not found"}, r.Now()
			continue
		}
		k := [2]string{p.CustomerID, p.Meter}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	sem := make(chan struct{}, d.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, k := range order {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, i := range groups[k] {
				if d.limiter != nil {
					if err := d.limiter.Wait(ctx); err != nil {
						outs[i] = outcome{canceled: true}
						continue
					}
				}
				times[i] = r.Now()
				outs[i] = d.push(ctx, pushes[claims[i].ID], times[i])
			}
		}()
	}
	wg.Wait()
	for i, c := range claims {
		if outs[i].canceled {
			rec.released = append(rec.released, c.ID)
			continue
		}
		rec.add(d, c, outs[i], times[i])
	}
	rec.finish(d, r.Now())
	return rec
}

// push sends one meter event. A timestamp outside Stripe's window is never
// sent with another time: the push is dead with the reason, and so is one
// whose customer has no Stripe customer (link it, then stripe retry).
//
// A cancel (a void within Stripe's 24 hours, stripe.Sync.Row) is sent as a
// meter event adjustment, under the push's identifier as its idempotency
// key. When Stripe refuses it (400: the 24 hours have passed, or it never
// received the event), the push is sent as the compensating value instead:
// both take the same whole number off Stripe's sum.
func (d *destination) push(ctx context.Context, p schema.StripePush, now time.Time) outcome {
	if p.Cancels != "" {
		tctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout.Duration)
		res := d.stripe.CancelMeterEvent(tctx, p.EventName, p.Cancels, p.Identifier)
		cancel()
		if !res.Permanent || res.Status != http.StatusBadRequest {
			return d.outcomeOf(ctx, res)
		}
		d.relay.Log.Info("forward", "destination", d.cfg.Name, "push", p.Identifier,
			"note", "Stripe refused the cancel of "+p.Cancels+" ("+res.Err+"): sending the compensating value")
	}
	if err := stripe.CheckWindow(p.Timestamp, now); err != nil {
		return outcome{err: err.Error(), permanent: true}
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
	return d.outcomeOf(ctx, d.stripe.SendMeterEvent(ctx, stripe.MeterEvent{EventName: p.EventName, Identifier: p.Identifier, Customer: customer,
		Value: p.Value, Timestamp: p.Timestamp}))
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
