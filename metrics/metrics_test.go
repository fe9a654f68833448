package metrics

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hookledger/hookledger/schema"
)

// scrape fetches /metrics over real HTTP and parses it with the Prometheus
// text parser, as a Prometheus server would.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return mfs
}

// find returns the metric of family name whose labels include want, or nil.
func find(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is the value of a counter or gauge; it fails the test if absent.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(mfs, name, labels)
	if m == nil {
		t.Fatalf("%s%v: not exported", name, labels)
	}
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s%v is neither a counter nor a gauge", name, labels)
	return 0
}

type L = map[string]string

func TestDeliveriesByProviderOutcomeReason(t *testing.T) {
	m := New(Options{Providers: []string{"acme", "stripe"}, Version: "1.2.3", Commit: "abc"})
	m.ObserveDelivery("acme", "inserted", "", 3*time.Millisecond)
	m.ObserveDelivery("acme", "inserted", "", 7*time.Millisecond)
	m.ObserveDelivery("acme", "duplicate", "", time.Millisecond)
	m.ObserveDelivery("acme", "rejected", "bad_signature", 100*time.Microsecond)
	m.ObserveDelivery("acme", "rejected", "timestamp_out_of_tolerance", 100*time.Microsecond)
	// Unconfigured provider names come from the URL: they share one label.
	for _, p := range []string{"x1", "x2", "x3"} {
		m.ObserveDelivery(p, "rejected", "unknown_provider", 50*time.Microsecond)
	}
	mfs := scrape(t, m)

	for _, c := range []struct {
		labels L
		want   float64
	}{
		{L{"provider": "acme", "outcome": "inserted", "reason": ""}, 2},
		{L{"provider": "acme", "outcome": "duplicate", "reason": ""}, 1},
		{L{"provider": "acme", "outcome": "payload_mismatch", "reason": ""}, 0},
		{L{"provider": "acme", "outcome": "rejected", "reason": "bad_signature"}, 1},
		{L{"provider": "acme", "outcome": "rejected", "reason": "timestamp_out_of_tolerance"}, 1},
		{L{"provider": UnknownProvider, "outcome": "rejected", "reason": "unknown_provider"}, 3},
		// Configured providers have their series from the first scrape.
		{L{"provider": "stripe", "outcome": "inserted", "reason": ""}, 0},
		{L{"provider": "stripe", "outcome": "rejected", "reason": "bad_signature"}, 0},
	} {
		if got := value(t, mfs, "hookledger_deliveries_total", c.labels); got != c.want {
			t.Errorf("hookledger_deliveries_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	for _, p := range []string{"x1", "x2", "x3"} {
		if find(mfs, "hookledger_deliveries_total", L{"provider": p}) != nil {
			t.Errorf("unconfigured provider %q became a label value", p)
		}
	}
	h := find(mfs, "hookledger_delivery_duration_seconds", L{"provider": "acme", "outcome": "inserted"}).GetHistogram()
	if h.GetSampleCount() != 2 || h.GetSampleSum() < 0.0099 || h.GetSampleSum() > 0.0101 {
		t.Errorf("inserted latency: count %d sum %v, want 2 and 0.010", h.GetSampleCount(), h.GetSampleSum())
	}
	if got := value(t, mfs, "hookledger_build_info", L{"version": "1.2.3", "commit": "abc"}); got != 1 {
		t.Errorf("build_info = %v", got)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_resident_memory_bytes", "process_open_fds"} {
		if mfs[name] == nil {
			t.Errorf("%s missing: Go and process collectors must be registered", name)
		}
	}
}

func TestWriterBatchesAndQueue(t *testing.T) {
	m := New(Options{})
	depth := 17
	m.WatchWriterQueue(func() int { return depth }, 4096)
	m.ObserveBatch(1, 2*time.Millisecond)
	m.ObserveBatch(40, 3*time.Millisecond)
	m.ObserveBatch(512, 5*time.Millisecond)
	mfs := scrape(t, m)
	if got := value(t, mfs, "hookledger_writer_queue_depth", nil); got != 17 {
		t.Errorf("queue depth = %v, want 17", got)
	}
	depth = 3 // read at scrape time, not at registration
	if got := value(t, scrape(t, m), "hookledger_writer_queue_depth", nil); got != 3 {
		t.Errorf("queue depth after change = %v, want 3", got)
	}
	if got := value(t, mfs, "hookledger_writer_queue_capacity", nil); got != 4096 {
		t.Errorf("queue capacity = %v", got)
	}
	bs := mfs["hookledger_writer_batch_size"].Metric[0].GetHistogram()
	if bs.GetSampleCount() != 3 || bs.GetSampleSum() != 553 {
		t.Errorf("batch size: count %d sum %v, want 3 and 553", bs.GetSampleCount(), bs.GetSampleSum())
	}
	for _, b := range bs.Bucket {
		if b.GetUpperBound() == 32 && b.GetCumulativeCount() != 1 {
			t.Errorf("batch size le=32: %d, want 1", b.GetCumulativeCount())
		}
		if b.GetUpperBound() == 512 && b.GetCumulativeCount() != 3 {
			t.Errorf("batch size le=512: %d, want 3", b.GetCumulativeCount())
		}
	}
	cl := mfs["hookledger_writer_commit_duration_seconds"].Metric[0].GetHistogram()
	if cl.GetSampleCount() != 3 || cl.GetSampleSum() < 0.0099 || cl.GetSampleSum() > 0.0101 {
		t.Errorf("commit latency: count %d sum %v", cl.GetSampleCount(), cl.GetSampleSum())
	}
}

// openDB opens a migrated database in a temporary directory.
func openDB(t *testing.T) *schema.DB {
	t.Helper()
	db, err := schema.Open(context.Background(), filepath.Join(t.TempDir(), schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func addReceipt(t *testing.T, db *schema.DB, id, status string, received time.Time) {
	t.Helper()
	_, err := db.Write.Exec(`INSERT INTO receipts (provider, event_id, body, body_sha256, status, handler_version, source, received_at, processed_at)
		VALUES ('acme', ?, '{}', x'00', ?, 'test', 'webhook', ?, ?)`, id, status, received.UnixMilli(), received.UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
}

func addLedgerRow(t *testing.T, db *schema.DB, id string) {
	t.Helper()
	_, err := db.Write.Exec(`INSERT INTO metered_usage (kind, provider, event_id, customer_id, meter, quantity, occurred_at, recorded_at, prev_hash, row_hash)
		VALUES ('usage', 'acme', ?, 'cus_1', 'api_requests', 1000000, 0, 0, x'00', x'00')`, id)
	if err != nil {
		t.Fatal(err)
	}
}

func TestDatabaseGaugesMatchRows(t *testing.T) {
	db := openDB(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	m := New(Options{})
	m.WatchDatabase(db, nil)
	// WatchDatabase reads the real clock; pin it for the age assertion.
	m.dbCollector().now = func() time.Time { return now }

	mfs := scrape(t, m)
	for _, s := range receiptStatuses {
		if got := value(t, mfs, "hookledger_receipts", L{"status": s}); got != 0 {
			t.Errorf("empty database: receipts{%s} = %v", s, got)
		}
	}
	if got := value(t, mfs, "hookledger_oldest_failed_receipt_age_seconds", nil); got != 0 {
		t.Errorf("no failed receipt: age = %v, want 0", got)
	}

	for i, s := range []string{"applied", "applied", "applied", "ignored", "failed", "failed"} {
		addReceipt(t, db, "evt_"+string(rune('a'+i)), s, now.Add(-time.Duration(i)*time.Minute))
	}
	for _, id := range []string{"evt_a", "evt_b", "evt_c"} {
		addLedgerRow(t, db, id)
	}
	mfs = scrape(t, m)
	var want = map[string]float64{}
	rows, err := db.Read.Query(`SELECT status, COUNT(*) FROM receipts GROUP BY status`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		var n float64
		rows.Scan(&s, &n)
		want[s] = n
	}
	rows.Close()
	for _, s := range receiptStatuses {
		if got := value(t, mfs, "hookledger_receipts", L{"status": s}); got != want[s] {
			t.Errorf("receipts{%s} = %v, the table has %v", s, got, want[s])
		}
	}
	// The oldest failed receipt (evt_f) arrived five minutes before now.
	if got := value(t, mfs, "hookledger_oldest_failed_receipt_age_seconds", nil); got != 300 {
		t.Errorf("oldest failed age = %v, want 300", got)
	}
	if got := value(t, mfs, "hookledger_ledger_rows", nil); got != 3 {
		t.Errorf("ledger rows = %v, want 3", got)
	}
	if got := value(t, mfs, "hookledger_db_stats_up", nil); got != 1 {
		t.Errorf("db_stats_up = %v", got)
	}
	if find(mfs, "go_sql_open_connections", L{"db_name": "write"}) == nil || find(mfs, "go_sql_open_connections", L{"db_name": "read"}) == nil {
		t.Error("connection pool stats missing")
	}
}

func TestDatabaseStatsFailureKeepsTheRest(t *testing.T) {
	db := openDB(t)
	m := New(Options{})
	m.WatchDatabase(db, nil)
	m.ObserveDelivery("acme", "inserted", "", time.Millisecond)
	db.Read.Close() // every scrape-time query now fails

	mfs := scrape(t, m)
	if got := value(t, mfs, "hookledger_db_stats_up", nil); got != 0 {
		t.Errorf("db_stats_up = %v, want 0", got)
	}
	for _, name := range []string{"hookledger_receipts", "hookledger_ledger_rows", "hookledger_oldest_failed_receipt_age_seconds"} {
		if mfs[name] != nil {
			t.Errorf("%s exported although its query failed", name)
		}
	}
	if mfs["hookledger_deliveries_total"] == nil || mfs["go_goroutines"] == nil {
		t.Error("a failing database query must not drop the other metrics")
	}
}

func TestDatabaseStatsTimeout(t *testing.T) {
	db := openDB(t)
	m := New(Options{})
	m.WatchDatabase(db, nil)
	c := m.dbCollector()
	c.timeout = time.Nanosecond
	start := time.Now()
	mfs := scrape(t, m)
	if got := value(t, mfs, "hookledger_db_stats_up", nil); got != 0 {
		t.Errorf("db_stats_up = %v after a timeout, want 0", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("scrape took %v despite a 1ns timeout", d)
	}
}

func TestReplicationStatus(t *testing.T) {
	m := New(Options{})
	if mfs := scrape(t, m); mfs["hookledger_replication_up"] != nil {
		t.Fatal("replication metrics exported although not replicating")
	}
	last := time.Date(2026, 11, 29, 11, 59, 58, 0, time.UTC)
	m.SetReplicationStatus(func() (time.Duration, time.Time, bool) { return 1500 * time.Millisecond, last, true })
	mfs := scrape(t, m)
	if got := value(t, mfs, "hookledger_replication_up", nil); got != 1 {
		t.Errorf("up = %v", got)
	}
	if got := value(t, mfs, "hookledger_replication_lag_seconds", nil); got != 1.5 {
		t.Errorf("lag = %v, want 1.5", got)
	}
	if got := value(t, mfs, "hookledger_replication_last_sync_timestamp_seconds", nil); got != float64(last.Unix()) {
		t.Errorf("last sync = %v, want %v", got, last.Unix())
	}

	m.SetReplicationStatus(func() (time.Duration, time.Time, bool) { return 0, time.Time{}, false })
	mfs = scrape(t, m)
	if got := value(t, mfs, "hookledger_replication_up", nil); got != 0 {
		t.Errorf("unhealthy: up = %v", got)
	}
	if mfs["hookledger_replication_last_sync_timestamp_seconds"] != nil {
		t.Error("never synced: last sync timestamp must be absent, not 1970")
	}
}

func TestReplicationStatusThatHangs(t *testing.T) {
	m := New(Options{})
	m.replication.timeout = 50 * time.Millisecond
	release := make(chan struct{})
	defer close(release)
	m.SetReplicationStatus(func() (time.Duration, time.Time, bool) {
		<-release
		return 0, time.Now(), true
	})
	mfs := scrape(t, m)
	if got := value(t, mfs, "hookledger_replication_up", nil); got != 0 {
		t.Errorf("hung status: up = %v, want 0", got)
	}
	if mfs["hookledger_replication_lag_seconds"] != nil {
		t.Error("hung status: lag must be absent")
	}
}

func TestReconcileAndTLS(t *testing.T) {
	m := New(Options{})
	before := time.Now().Unix()
	m.ReconcileRun("stripe", 4, nil)
	m.ReconcileRun("stripe", 0, errors.New("list events: 500"))
	m.ReconcileRun("stripe", 2, nil)
	notAfter := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	m.SetTLSCertificate(notAfter)
	m.TLSReload(nil)
	m.TLSReload(errors.New("bad key"))
	m.TLSReload(errors.New("bad key"))
	mfs := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels L
		want   float64
	}{
		{"hookledger_reconcile_runs_total", L{"provider": "stripe", "result": "ok"}, 2},
		{"hookledger_reconcile_runs_total", L{"provider": "stripe", "result": "error"}, 1},
		{"hookledger_reconcile_inserted_events_total", L{"provider": "stripe"}, 6},
		{"hookledger_tls_reloads_total", L{"result": "ok"}, 1},
		{"hookledger_tls_reloads_total", L{"result": "error"}, 2},
		{"hookledger_tls_certificate_expiry_timestamp_seconds", nil, float64(notAfter.Unix())},
	} {
		if got := value(t, mfs, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := value(t, mfs, "hookledger_reconcile_last_success_timestamp_seconds", L{"provider": "stripe"}); got < float64(before) {
		t.Errorf("last success = %v, before the run at %d", got, before)
	}
}

func TestDisk(t *testing.T) {
	m := New(Options{})
	var fail bool
	m.WatchDisk(func() (uint64, uint64, error) {
		if fail {
			return 0, 0, errors.New("statfs: no such file")
		}
		return 5 << 30, 20 << 30, nil
	})
	mfs := scrape(t, m)
	if got := value(t, mfs, "hookledger_data_filesystem_avail_bytes", nil); got != 5<<30 {
		t.Errorf("avail = %v", got)
	}
	if got := value(t, mfs, "hookledger_data_filesystem_size_bytes", nil); got != 20<<30 {
		t.Errorf("size = %v", got)
	}
	fail = true
	if mfs := scrape(t, m); mfs["hookledger_data_filesystem_avail_bytes"] != nil {
		t.Error("disk metrics exported although statfs failed")
	}
}

func TestTLSMetricsAbsentWithoutTLS(t *testing.T) {
	mfs := scrape(t, New(Options{}))
	for name := range mfs {
		if strings.HasPrefix(name, "hookledger_tls_") {
			t.Errorf("%s exported although TLS is not served", name)
		}
	}
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *Metrics
	m.ObserveDelivery("acme", "inserted", "", time.Millisecond)
	m.ObserveBatch(1, time.Millisecond)
	m.WatchWriterQueue(func() int { return 0 }, 1)
	m.WatchDatabase(nil, nil)
	m.ReconcileRun("stripe", 1, nil)
	m.SetReplicationStatus(nil)
	m.SetTLSCertificate(time.Now())
	m.TLSReload(nil)
	m.WatchDisk(nil)
	in := m.WatchInvoicing()
	in.ObserveClose("closed")
	in.SetLatest(time.Now(), time.Now())
}

// Every exported family passes promlint, the linter behind `promtool check
// metrics`: counters end in _total, units are base units, help is present.
func TestNamesFollowPrometheusConventions(t *testing.T) {
	db := openDB(t)
	m := full(t, db)
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ours []*dto.MetricFamily
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), Namespace+"_") {
			ours = append(ours, mf)
		}
	}
	if len(ours) < 15 {
		t.Fatalf("only %d hookledger families gathered", len(ours))
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

// full returns Metrics with every optional part wired and exercised once.
func full(t *testing.T, db *schema.DB) *Metrics {
	t.Helper()
	m := New(Options{Providers: []string{"acme"}, Version: "test", Commit: "test"})
	m.WatchDatabase(db, nil)
	m.WatchWriterQueue(func() int { return 0 }, 4096)
	m.ObserveDelivery("acme", "inserted", "", time.Millisecond)
	m.ObserveBatch(1, time.Millisecond)
	m.ReconcileRun("acme", 1, nil)
	m.SetReplicationStatus(func() (time.Duration, time.Time, bool) { return time.Second, time.Now(), true })
	m.SetTLSCertificate(time.Now().Add(time.Hour))
	m.TLSReload(nil)
	m.WatchDisk(func() (uint64, uint64, error) { return 1, 2, nil })
	m.WatchForward(db, []string{"app"}, nil).ObserveAttempt("app", "delivered", time.Millisecond)
	in := m.WatchInvoicing()
	in.ObserveClose("closed")
	in.SetLatest(time.Now(), time.Now().Add(-time.Hour))
	return m
}

func BenchmarkObserveDelivery(b *testing.B) {
	m := New(Options{Providers: []string{"acme"}})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveDelivery("acme", "inserted", "", time.Millisecond)
		}
	})
}

func TestChainHeadGauges(t *testing.T) {
	db := openDB(t)
	m := New(Options{})
	m.WatchDatabase(db, nil)
	zero := "ledger:0:" + strings.Repeat("00", 32)
	mfs := scrape(t, m)
	if got := value(t, mfs, "hookledger_chain_head_id", L{"chain": "ledger"}); got != 0 {
		t.Errorf("empty database: head id %v", got)
	}
	if find(mfs, "hookledger_chain_head_info", L{"chain": "ledger", "anchor": zero}) == nil {
		t.Errorf("empty database: no info series with anchor %s", zero)
	}
	db.Write.MustExec(`UPDATE chain_head SET ledger_id = 3, ledger_hash = ?, receipt_id = 6, receipt_hash = ?`,
		bytes.Repeat([]byte{0xab}, 32), bytes.Repeat([]byte{0xcd}, 32))
	mfs = scrape(t, m)
	if got := value(t, mfs, "hookledger_chain_head_id", L{"chain": "ledger"}); got != 3 {
		t.Errorf("ledger head id %v, want 3", got)
	}
	if got := value(t, mfs, "hookledger_chain_head_id", L{"chain": "receipts"}); got != 6 {
		t.Errorf("receipts head id %v, want 6", got)
	}
	for chain, anchor := range map[string]string{"ledger": "ledger:3:" + strings.Repeat("ab", 32), "receipts": "receipts:6:" + strings.Repeat("cd", 32)} {
		if v := find(mfs, "hookledger_chain_head_info", L{"chain": chain, "anchor": anchor}); v == nil || v.GetGauge().GetValue() != 1 {
			t.Errorf("no hookledger_chain_head_info{chain=%q,anchor=%q} 1", chain, anchor)
		}
	}
}

// The scheduled-close metrics exist only with invoicing configured, every
// outcome from the first scrape at 0.
func TestInvoicingMetrics(t *testing.T) {
	m := New(Options{})
	for name := range scrape(t, m) {
		if strings.HasPrefix(name, "hookledger_invoice_") {
			t.Errorf("%s exported although invoicing is off", name)
		}
	}
	in := m.WatchInvoicing()
	mfs := scrape(t, m)
	closes := mfs["hookledger_invoice_scheduled_closes_total"]
	if closes == nil || len(closes.GetMetric()) != len(InvoiceCloseOutcomes) {
		t.Fatalf("closes by outcome not all exported at 0: %v", closes)
	}
	in.ObserveClose("closed")
	in.ObserveClose("closed")
	in.ObserveClose("error")
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	in.SetLatest(end.Add(72*time.Hour+1500*time.Millisecond), end)
	mfs = scrape(t, m)
	for _, c := range []struct {
		name, outcome string
		want          float64
	}{
		{"hookledger_invoice_scheduled_closes_total", "closed", 2},
		{"hookledger_invoice_scheduled_closes_total", "existing", 0},
		{"hookledger_invoice_scheduled_closes_total", "error", 1},
		{"hookledger_invoice_last_close_timestamp_seconds", "", float64(end.Unix()) + 72*3600 + 1.5},
		{"hookledger_invoice_closed_through_timestamp_seconds", "", float64(end.Unix())},
	} {
		got := -1.0
		for _, s := range mfs[c.name].GetMetric() {
			if c.outcome == "" {
				got = s.GetGauge().GetValue()
			} else if s.GetLabel()[0].GetValue() == c.outcome {
				got = s.GetCounter().GetValue()
			}
		}
		if got != c.want {
			t.Errorf("%s %s = %v, want %v", c.name, c.outcome, got, c.want)
		}
	}
}
