package console

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// The receipt statuses and sources the filters offer (the receipts table's
// CHECK constraints allow only these).
var (
	statuses = []string{string(custody.StatusApplied), string(custody.StatusIgnored), string(custody.StatusFailed)}
	sources  = []string{string(custody.SourceWebhook), string(custody.SourceReconcile), string(custody.SourceReplay), string(custody.SourceAPI)}
)

type eventsView struct {
	Provider, Type, Status, Source, Customer, From, To, Q string
	Providers, Statuses, Sources                          []string
	Before                                                int64
	Receipts                                              []schema.ReceiptSummary
	// Older is the cursor of the next page (0: none); Searched says the
	// page examined receipts down to Older without filling up.
	Older    int64
	Searched bool
	Window   int // receipts a filtered page examines at most
	Error    string
}

// events lists receipts newest first, one page at a time (keyset on the
// receipt id, or with a customer on that customer's ledger row id: see
// schema.ConsoleReceipts), each with its customer, quantities and event
// time from the ledger, or finds one event id.
func (c *Console) events(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	v := eventsView{Provider: q.Get("provider"), Type: q.Get("type"), Status: q.Get("status"), Source: q.Get("source"),
		Customer: q.Get("customer"), From: q.Get("from"), To: q.Get("to"), Q: q.Get("q"), Statuses: statuses, Sources: sources, Window: c.ScanWindow}
	providers, err := c.DB.ReceiptProviders(r.Context())
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	v.Providers = providers
	if v.Q != "" {
		in := providers
		if v.Provider != "" {
			in = []string{v.Provider}
		}
		v.Receipts, err = c.DB.ReceiptsByEventID(r.Context(), in, v.Q)
		if err != nil {
			c.internal(w, r, s, err)
			return
		}
		c.render(w, r, s, http.StatusOK, "events", "Events", v)
		return
	}
	p := schema.ReceiptPage{Provider: v.Provider, Type: v.Type, Status: v.Status, Source: v.Source, Customer: v.Customer,
		Limit: eventsPerPage, Window: c.ScanWindow}
	if b, err := strconv.ParseInt(q.Get("before"), 10, 64); err == nil && b > 0 {
		p.Before, v.Before = b, b
	}
	for _, f := range []struct {
		text string
		ms   *int64
		name string
	}{{v.From, &p.From, "from"}, {v.To, &p.To, "to"}} {
		if f.text == "" {
			continue
		}
		t, err := ledger.ParseTime(f.text, time.UTC)
		if err != nil {
			v.Error = f.name + ": " + err.Error()
			c.render(w, r, s, http.StatusBadRequest, "events", "Events", v)
			return
		}
		*f.ms = t.UnixMilli()
	}
	if v.Status != "" && !slices.Contains(statuses, v.Status) || v.Source != "" && !slices.Contains(sources, v.Source) {
		v.Error = "status or source: not one the receipts table holds"
		c.render(w, r, s, http.StatusBadRequest, "events", "Events", v)
		return
	}
	res, err := c.DB.ConsoleReceipts(r.Context(), p)
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	v.Receipts, v.Older, v.Searched = res.Receipts, res.Next, res.Searched
	c.render(w, r, s, http.StatusOK, "events", "Events", v)
}
