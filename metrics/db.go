package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Receipt statuses, reported even when zero so dashboards and alerts see 0
// rather than no data.
var receiptStatuses = []string{string(custody.StatusApplied), string(custody.StatusIgnored), string(custody.StatusFailed)}

// DBStatsTimeout bounds the scrape-time database queries; past it the
// database metrics are left out of that scrape and hookledger_db_stats_up is 0.
const DBStatsTimeout = 2 * time.Second

// WatchDatabase exports database-derived gauges, read at scrape time from
// db's read pool (never on the delivery path), and the connection-pool
// statistics of both pools. Call it once.
func (m *Metrics) WatchDatabase(db *schema.DB, log *slog.Logger) {
	if m == nil {
		return
	}
	m.dbc = &dbCollector{db: db, now: time.Now, timeout: DBStatsTimeout, log: log}
	read, write := db.Pools()
	m.Registry.MustRegister(
		m.dbc,
		collectors.NewDBStatsCollector(read, "read"),
		collectors.NewDBStatsCollector(write, "write"),
	)
}

func (m *Metrics) dbCollector() *dbCollector { return m.dbc }

// snapshotter is what the scrape reads from storage; *schema.DB satisfies it.
type snapshotter interface {
	View(ctx context.Context, fn func(*schema.ReadTx) error) error
}

type dbCollector struct {
	db      snapshotter
	now     func() time.Time
	timeout time.Duration
	log     *slog.Logger
}

var (
	dbUpDesc = prometheus.NewDesc(Namespace+"_db_stats_up",
		"1 when the scrape-time database queries succeeded, else 0 (the database gauges are then missing).", nil, nil)
	receiptsDesc = prometheus.NewDesc(Namespace+"_receipts",
		"Stored receipts by status (applied, ignored, failed).", []string{"status"}, nil)
	oldestFailedDesc = prometheus.NewDesc(Namespace+"_oldest_failed_receipt_age_seconds",
		"Age of the oldest receipt in status failed (a payload that needs repair and replay); 0 when there is none.", nil, nil)
	ledgerRowsDesc = prometheus.NewDesc(Namespace+"_ledger_rows",
		"Rows in the append-only metered-usage ledger (usage and adjustments).", nil, nil)
	strandedDesc = prometheus.NewDesc(Namespace+"_usage_stranded_rows",
		"Ledger rows (usage and adjustments) dated before the first period closed for their customer: on no path to an invoice; `hookledger usage stranded` lists them.", nil, nil)
	headIDDesc = prometheus.NewDesc(Namespace+"_chain_head_id",
		"Id of the last row of each hash chain (chain: ledger = metered_usage.id, receipts = receipts.id).", []string{"chain"}, nil)
	headInfoDesc = prometheus.NewDesc(Namespace+"_chain_head_info",
		"Always 1; anchor is the chain's head as chain:id:hash, for `hookledger verify --anchor`. It changes with every write.",
		[]string{"chain", "anchor"}, nil)
)

func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dbUpDesc
	ch <- receiptsDesc
	ch <- oldestFailedDesc
	ch <- ledgerRowsDesc
	ch <- strandedDesc
	ch <- headIDDesc
	ch <- headInfoDesc
}

func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.read()
	if err != nil {
		if c.log != nil {
			c.log.Warn("metrics: database stats", "error", err.Error())
		}
		ch <- prometheus.MustNewConstMetric(dbUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(dbUpDesc, prometheus.GaugeValue, 1)
	for _, s := range receiptStatuses {
		ch <- prometheus.MustNewConstMetric(receiptsDesc, prometheus.GaugeValue, float64(st.receipts[s]), s)
	}
	ch <- prometheus.MustNewConstMetric(oldestFailedDesc, prometheus.GaugeValue, st.oldestFailedAge.Seconds())
	ch <- prometheus.MustNewConstMetric(ledgerRowsDesc, prometheus.GaugeValue, float64(st.ledgerRows))
	ch <- prometheus.MustNewConstMetric(strandedDesc, prometheus.GaugeValue, float64(st.strandedRows))
	for _, a := range st.anchors {
		ch <- prometheus.MustNewConstMetric(headIDDesc, prometheus.GaugeValue, float64(a.ID), a.Chain)
		ch <- prometheus.MustNewConstMetric(headInfoDesc, prometheus.GaugeValue, 1, a.Chain, a.String())
	}
}

type dbStats struct {
	receipts        map[string]int64
	oldestFailedAge time.Duration
	ledgerRows      int64
	strandedRows    int64
	anchors         []ledger.Anchor
}

// read runs the queries in one read transaction, so they describe one
// snapshot of the database.
func (c *dbCollector) read() (dbStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st := dbStats{receipts: map[string]int64{}}
	err := c.db.View(ctx, func(s *schema.ReadTx) error {
		counts, err := s.Stats(ctx)
		if err != nil {
			return err
		}
		st.receipts[string(custody.StatusApplied)], st.receipts[string(custody.StatusIgnored)], st.receipts[string(custody.StatusFailed)] = counts.Applied, counts.Ignored, counts.Failed
		if counts.HasFailed {
			st.oldestFailedAge = max(0, c.now().Sub(time.UnixMilli(counts.OldestFailedAt)))
		}
		st.ledgerRows = counts.LedgerRows
		if st.strandedRows, err = invoice.StrandedRows(ctx, s); err != nil {
			return err
		}
		st.anchors, err = invoice.LoadAnchors(ctx, s)
		return err
	})
	return st, err
}

// DiskStatFunc reports the free (available to unprivileged users) and total
// bytes of the filesystem holding the data directory.
type DiskStatFunc func() (free, total uint64, err error)

// WatchDisk exports the data directory's filesystem space, read at scrape
// time. A full disk is the commonest way a single-VM service stops: alert on
// it here even where node_exporter is not installed. Call it once.
func (m *Metrics) WatchDisk(stat DiskStatFunc) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(diskCollector(stat))
}

type diskCollector DiskStatFunc

var (
	diskFreeDesc = prometheus.NewDesc(Namespace+"_data_filesystem_avail_bytes",
		"Bytes available to hookledger on the filesystem holding the data directory.", nil, nil)
	diskSizeDesc = prometheus.NewDesc(Namespace+"_data_filesystem_size_bytes",
		"Size of the filesystem holding the data directory.", nil, nil)
)

func (c diskCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- diskFreeDesc
	ch <- diskSizeDesc
}

func (c diskCollector) Collect(ch chan<- prometheus.Metric) {
	free, total, err := c()
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(free))
	ch <- prometheus.MustNewConstMetric(diskSizeDesc, prometheus.GaugeValue, float64(total))
}
