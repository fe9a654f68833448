package console

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Overview hours: the default and the longest the chart spans. A day keeps
// the page well inside its time budget on a busy database: the per-minute
// counts read one receipts_status index entry per event in the window
// (about 50 ms for 55,000 events; see BENCHMARKS.md).
const (
	defaultHours = 6
	maxHours     = TallyMinutes / 60
)

type minuteRow struct {
	Minute                                time.Time
	Inserted, Duplicate, Rejected, Failed int64
}

type overviewView struct {
	Hours                                 int
	From, To                              time.Time
	Chart                                 *chart
	Minutes                               []minuteRow // minutes with any count, newest first
	Inserted, Duplicate, Rejected, Failed int64
	TallyFrom                             time.Time // zero: no tally
	OldestFailed                          *schema.ReceiptSummary
	FailedCount                           int64
	Replication                           *Replication
	NotReplicating                        string
	Forwarding                            []forward.DestinationStatus // nil: no destinations
	LedgerID, ReceiptID                   int64
	LedgerHash, ReceiptHash               string
}

// overview: events per minute over the last hours, the oldest failed
// receipt, replication, and the chain head.
func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) {
	hours := defaultHours
	if h, err := strconv.Atoi(r.URL.Query().Get("hours")); err == nil && h >= 1 && h <= maxHours {
		hours = h
	}
	now := c.Now()
	to := now.Truncate(time.Minute).Add(time.Minute)
	from := to.Add(-time.Duration(hours) * time.Hour)
	v := overviewView{Hours: hours, From: from, To: to}
	counts, err := c.DB.ReceiptsPerMinute(r.Context(), from.UnixMilli(), to.UnixMilli())
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	n := hours * 60
	first := from.Unix() / 60
	series := make([][]int64, 4) // inserted, duplicate, rejected, failed
	for i := range series {
		series[i] = make([]int64, n)
	}
	for _, mc := range counts {
		i := int(mc.Minute - first)
		if i < 0 || i >= n {
			continue
		}
		if mc.Status == "failed" {
			series[3][i] += mc.N
		} else {
			series[0][i] += mc.N
		}
	}
	if c.Tally != nil {
		v.TallyFrom = c.Tally.Started()
		for i := range n {
			series[1][i], series[2][i] = c.Tally.counts(first + int64(i))
		}
	}
	labels := make([]string, n)
	for i := range n {
		m := time.Unix((first+int64(i))*60, 0).UTC()
		labels[i] = m.Format("15:04")
		row := minuteRow{Minute: m, Inserted: series[0][i], Duplicate: series[1][i], Rejected: series[2][i], Failed: series[3][i]}
		v.Inserted += row.Inserted
		v.Duplicate += row.Duplicate
		v.Rejected += row.Rejected
		v.Failed += row.Failed
		if row.Inserted+row.Duplicate+row.Rejected+row.Failed > 0 {
			v.Minutes = append(v.Minutes, row)
		}
	}
	for i, j := 0, len(v.Minutes)-1; i < j; i, j = i+1, j-1 {
		v.Minutes[i], v.Minutes[j] = v.Minutes[j], v.Minutes[i]
	}
	v.Chart = lineChart(labels, []chartSeries{
		{Name: "inserted", Class: "s-inserted"}, {Name: "duplicate", Class: "s-duplicate"},
		{Name: "rejected", Class: "s-rejected"}, {Name: "failed", Class: "s-failed"},
	}, series)

	oldest, nFailed, err := c.DB.OldestFailedReceipt(r.Context())
	switch {
	case errors.Is(err, schema.ErrNotFound):
	case err != nil:
		c.internal(w, r, s, err)
		return
	default:
		v.OldestFailed, v.FailedCount = &oldest, nFailed
	}
	if len(c.Destinations) > 0 {
		// forward.Status: what `hookledger forward status` prints.
		if v.Forwarding, err = forward.Status(r.Context(), c.DB, c.Destinations, c.Secrets, now); err != nil {
			c.internal(w, r, s, err)
			return
		}
	}
	if c.Replication != nil {
		rep := c.Replication()
		v.Replication = &rep
	} else {
		v.NotReplicating = c.NotReplicating
		if v.NotReplicating == "" {
			v.NotReplicating = "no replica is configured"
		}
	}
	head, err := ledger.LoadHead(r.Context(), c.DB)
	if err != nil && !errors.Is(err, ledger.ErrNotChained) {
		c.internal(w, r, s, err)
		return
	}
	v.LedgerID, v.LedgerHash = head.Ledger.LastID, hex.EncodeToString(head.Ledger.LastHash)
	v.ReceiptID, v.ReceiptHash = head.Receipts.LastID, hex.EncodeToString(head.Receipts.LastHash)
	c.render(w, r, s, http.StatusOK, "overview", "Overview", v)
}
