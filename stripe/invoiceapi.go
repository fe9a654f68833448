package stripe

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Invoice is what hookledger reads of a Stripe invoice (GET, POST
// /v1/invoices…).
type Invoice struct {
	ID        string            `json:"id"`
	Number    string            `json:"number"`
	Status    string            `json:"status"` // draft, open, paid, uncollectible, void
	Currency  string            `json:"currency"`
	AmountDue int64             `json:"amount_due"` // minor units
	HostedURL string            `json:"hosted_invoice_url"`
	Metadata  map[string]string `json:"metadata"`
}

// InvoiceItem is what hookledger reads of a Stripe invoice item.
type InvoiceItem struct {
	ID       string            `json:"id"`
	Metadata map[string]string `json:"metadata"`
}

// list is a page of a Stripe list.
type list[T any] struct {
	Data    []T  `json:"data"`
	HasMore bool `json:"has_more"`
}

// FindInvoice looks for customer's invoice whose metadata key is value among
// those created at or after since (unix seconds), page by page: how an
// invoice an earlier attempt created is found once Stripe has forgotten
// that attempt's idempotency key (after 24 hours). Listing is consistent
// at once, unlike Stripe's search.
func (c *Client) FindInvoice(ctx context.Context, customer, key, value string, since int64) (Invoice, bool, Result) {
	after := ""
	for {
		q := url.Values{}
		q.Set("customer", customer)
		q.Set("created[gte]", strconv.FormatInt(since, 10))
		q.Set("limit", "100")
		if after != "" {
			q.Set("starting_after", after)
		}
		var page list[Invoice]
		res := c.call(ctx, http.MethodGet, "/v1/invoices?"+q.Encode(), nil, "", &page)
		if !res.OK() {
			return Invoice{}, false, res
		}
		for _, inv := range page.Data {
			if inv.Metadata[key] == value {
				return inv, true, res
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			return Invoice{}, false, res
		}
		after = page.Data[len(page.Data)-1].ID
	}
}

// CreateInvoice posts POST /v1/invoices with form, under idempotency key.
func (c *Client) CreateInvoice(ctx context.Context, form url.Values, key string) (Invoice, Result) {
	var inv Invoice
	res := c.call(ctx, http.MethodPost, "/v1/invoices", form, key, &inv)
	return inv, res
}

// InvoiceItems lists the items of invoice id, every page.
func (c *Client) InvoiceItems(ctx context.Context, id string) ([]InvoiceItem, Result) {
	var out []InvoiceItem
	after := ""
	for {
		q := url.Values{}
		q.Set("invoice", id)
		q.Set("limit", "100")
		if after != "" {
			q.Set("starting_after", after)
		}
		var page list[InvoiceItem]
		res := c.call(ctx, http.MethodGet, "/v1/invoiceitems?"+q.Encode(), nil, "", &page)
		if !res.OK() {
			return nil, res
		}
		out = append(out, page.Data...)
		if !page.HasMore || len(page.Data) == 0 {
			return out, res
		}
		after = page.Data[len(page.Data)-1].ID
	}
}

// CreateInvoiceItem posts POST /v1/invoiceitems with form, under
// idempotency key.
func (c *Client) CreateInvoiceItem(ctx context.Context, form url.Values, key string) Result {
	var item InvoiceItem
	return c.call(ctx, http.MethodPost, "/v1/invoiceitems", form, key, &item)
}

// FinalizeInvoice posts POST /v1/invoices/{id}/finalize with
// auto_advance=true (Stripe then collects it: charges, or emails it), under
// idempotency key.
func (c *Client) FinalizeInvoice(ctx context.Context, id, key string) (Invoice, Result) {
	form := url.Values{}
	form.Set("auto_advance", "true")
	var inv Invoice
	res := c.call(ctx, http.MethodPost, "/v1/invoices/"+url.PathEscape(id)+"/finalize", form, key, &inv)
	return inv, res
}
