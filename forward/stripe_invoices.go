package forward

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

// createdSlack is how far before its push's creation the relay looks for an
// invoice an earlier attempt created: the two clocks (ours, Stripe's) may
// disagree, never by a day.
const createdSlack = 24 * time.Hour

// deliverInvoices attempts claimed invoice pushes, Concurrency at a time:
// each one is a few calls (stripe.invoices). What Stripe answered for each
// invoice completed (saveInvoices) is stored in the transaction that
// records its message delivered.
func (d *destination) deliverInvoices(ctx context.Context, claims []schema.OutboxClaim, ids []int64, rec *record) *record {
	r := d.relay
	pushes, err := r.Pushes.StripeInvoicePushesOf(ctx, ids)
	if err != nil {
		rec.released = ids
		r.Log.Warn("forward", "destination", d.cfg.Name, "error", "read invoice pushes: "+err.Error())
		rec.finish(d, r.Now())
		return rec
	}
	outs := make([]outcome, len(claims))
	times := make([]time.Time, len(claims))
	answers := make([]*schema.StripeInvoiceResult, len(claims))
	sem := make(chan struct{}, d.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, c := range claims {
		p, ok := pushes[c.ID]
		if !ok {
			outs[i], times[i] = outcome{err: "invoice push not found"}, r.Now()
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			times[i] = r.Now()
			outs[i], answers[i] = d.sendInvoice(ctx, p)
		})
	}
	wg.Wait()
	save := &saveInvoices{now: r.Now().UnixMilli()}
	for i, c := range claims {
		if a := answers[i]; a != nil && outs[i].ok() {
			save.pushes, save.results = append(save.pushes, pushes[c.ID].ID), append(save.results, *a)
		}
	}
	if len(save.pushes) > 0 {
		rec.also = save // in the transaction that records the deliveries
	}
	return rec.settle(d, claims, outs, times)
}

// saveInvoices is the op that appends what Stripe answered for the invoices
// a batch completed.
type saveInvoices struct {
	pushes  []int64
	results []schema.StripeInvoiceResult
	now     int64
}

// Apply implements custody.Op.
func (s *saveInvoices) Apply(ctx context.Context, tx *custody.Tx) error {
	for i, id := range s.pushes {
		if err := tx.Stripe().InsertStripeInvoiceResult(ctx, id, s.results[i], s.now); err != nil {
			return err
		}
	}
	return nil
}

// sendInvoice makes push p's Stripe invoice, once, however often it runs:
//
//  1. it looks for the invoice an earlier attempt created, by the push's
//     identifier in its metadata (an attempt that died after the create,
//     or whose answer was lost); else it creates it (a draft that takes
//     no pending item of the customer's but its own);
//  2. while the invoice is a draft, it adds the items it lacks, each found
//     by its key in its metadata;
//  3. it finalizes the draft when configured (Stripe then charges it, or
//     emails it).
//
// Every request carries an idempotency key derived from the push's
// identifier (itself derived from the invoice's digest), so a resend
// within Stripe's 24 hours gets the first answer; after them, step 1 and
// 2's lookups stand in. An attempt that fails part way leaves what it did
// for the next to find.
func (d *destination) sendInvoice(ctx context.Context, p schema.StripeInvoicePush) (outcome, *schema.StripeInvoiceResult) {
	var items []stripe.InvoiceItemPush
	if err := json.Unmarshal([]byte(p.Items), &items); err != nil {
		return outcome{err: "the invoice push's items: " + err.Error(), permanent: true}, nil
	}
	if len(items) > stripe.MaxInvoiceItems {
		return outcome{err: fmt.Sprintf("invoice %d has %d items: Stripe takes at most %d on one invoice", p.InvoiceID, len(items), stripe.MaxInvoiceItems),
			permanent: true}, nil
	}
	customer := p.StripeCustomer
	if customer == "" {
		var err error
		if customer, err = d.linked(ctx, p.CustomerID); err != nil {
			return outcome{err: err.Error()}, nil
		}
		if customer == "" {
			return outcome{err: fmt.Sprintf("customer %q has no Stripe customer: hookledger customers link %s --stripe cus_…, then hookledger stripe retry",
				p.CustomerID, p.CustomerID), permanent: true}, nil
		}
	}
	var total time.Duration
	var last stripe.Result
	call := func(fn func(ctx context.Context) stripe.Result) bool {
		if d.limiter != nil {
			if err := d.limiter.Wait(ctx); err != nil {
				last = stripe.Result{Err: "stopping"}
				return false
			}
		}
		cctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout.Duration)
		defer cancel()
		last = fn(cctx)
		total += last.Latency
		return last.OK()
	}
	failed := func() (outcome, *schema.StripeInvoiceResult) {
		o := d.outcomeOf(ctx, last)
		o.latency = total
		return o, nil
	}
	var inv stripe.Invoice
	var found bool
	if !call(func(ctx context.Context) stripe.Result {
		var res stripe.Result
		inv, found, res = d.stripe.FindInvoice(ctx, customer, stripe.MetaPush, p.Identifier, p.CreatedAt/1000-int64(createdSlack.Seconds()))
		return res
	}) {
		return failed()
	}
	if !found && !call(func(ctx context.Context) stripe.Result {
		var res stripe.Result
		inv, res = d.stripe.CreateInvoice(ctx, invoiceForm(p, customer), p.Identifier+"/invoice")
		return res
	}) {
		return failed()
	}
	if inv.Status == "draft" {
		var have []stripe.InvoiceItem
		if !call(func(ctx context.Context) stripe.Result {
			var res stripe.Result
			have, res = d.stripe.InvoiceItems(ctx, inv.ID)
			return res
		}) {
			return failed()
		}
		added := map[string]bool{}
		for _, it := range have {
			added[it.Metadata[stripe.MetaItem]] = true
		}
		for _, it := range items {
			if added[it.Key] {
				continue
			}
			if !call(func(ctx context.Context) stripe.Result {
				return d.stripe.CreateInvoiceItem(ctx, itemForm(p, customer, inv.ID, it), p.Identifier+"/"+it.Key)
			}) {
				return failed()
			}
		}
		if p.Finalize == 1 && !call(func(ctx context.Context) stripe.Result {
			var res stripe.Result
			inv, res = d.stripe.FinalizeInvoice(ctx, inv.ID, p.Identifier+"/finalize")
			return res
		}) {
			return failed()
		}
	}
	o := d.outcomeOf(ctx, last)
	o.latency = total
	return o, &schema.StripeInvoiceResult{StripeInvoice: inv.ID, Number: inv.Number, Status: inv.Status,
		AmountDue: strconv.FormatInt(inv.AmountDue, 10), Currency: strings.ToUpper(inv.Currency), HostedURL: inv.HostedURL}
}

// invoiceForm is POST /v1/invoices for p: a draft in p's currency that
// takes none of the customer's pending items, with the metadata that finds
// it again and links Stripe's events about it to the hookledger invoice.
func invoiceForm(p schema.StripeInvoicePush, customer string) url.Values {
	f := url.Values{}
	f.Set("customer", customer)
	f.Set("currency", strings.ToLower(p.Currency))
	f.Set("collection_method", p.CollectionMethod)
	if p.DaysUntilDue > 0 {
		f.Set("days_until_due", strconv.Itoa(p.DaysUntilDue))
	}
	f.Set("auto_advance", "false")
	f.Set("pending_invoice_items_behavior", "exclude")
	f.Set("description", fmt.Sprintf("hookledger invoice %d, %s", p.InvoiceID, p.Period))
	f.Set("metadata["+stripe.MetaInvoice+"]", strconv.FormatInt(p.InvoiceID, 10))
	f.Set("metadata["+stripe.MetaPush+"]", p.Identifier)
	f.Set("metadata["+stripe.MetaDigest+"]", hex.EncodeToString(p.Digest))
	return f
}

// itemForm is POST /v1/invoiceitems for item it of p on Stripe invoice id.
func itemForm(p schema.StripeInvoicePush, customer, id string, it stripe.InvoiceItemPush) url.Values {
	f := url.Values{}
	f.Set("customer", customer)
	f.Set("invoice", id)
	f.Set("amount", it.Amount)
	f.Set("currency", strings.ToLower(p.Currency))
	f.Set("description", it.Description)
	f.Set("period[start]", strconv.FormatInt(it.PeriodStart, 10))
	f.Set("period[end]", strconv.FormatInt(it.PeriodEnd, 10))
	f.Set("metadata["+stripe.MetaInvoice+"]", strconv.FormatInt(p.InvoiceID, 10))
	f.Set("metadata["+stripe.MetaItem+"]", it.Key)
	if it.Line != 0 {
		f.Set("metadata["+stripe.MetaLine+"]", strconv.FormatInt(it.Line, 10))
		f.Set("metadata["+stripe.MetaDigest+"]", it.Digest)
	}
	return f
}
