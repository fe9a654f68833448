package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ReplicationStatusFunc reports the replica's lag, the time of its last
// successful sync (zero if none) and whether replication is healthy. It is
// called at scrape time, so it should return values the replicator already
// holds rather than ask the replica over the network.
type ReplicationStatusFunc func() (lag time.Duration, lastSync time.Time, ok bool)

// replicationTimeout bounds a status call, so a stuck replica cannot stall a scrape.
const replicationTimeout = 2 * time.Second

// SetReplicationStatus makes the replication metrics report f. Until it is
// called (that is, when not replicating) no replication metrics are exported.
func (m *Metrics) SetReplicationStatus(f ReplicationStatusFunc) {
	if m == nil {
		return
	}
	m.replication.mu.Lock()
	m.replication.status = f
	m.replication.mu.Unlock()
}

type replicationCollector struct {
	timeout time.Duration
	mu      sync.Mutex
	status  ReplicationStatusFunc
}

var (
	replicationUpDesc = prometheus.NewDesc(Namespace+"_replication_up",
		"1 when the Litestream replica is healthy (its last operation succeeded), else 0.", nil, nil)
	replicationLagDesc = prometheus.NewDesc(Namespace+"_replication_lag_seconds",
		"How far the replica is behind the local database: the age of the oldest change not yet uploaded.", nil, nil)
	replicationLastSyncDesc = prometheus.NewDesc(Namespace+"_replication_last_sync_timestamp_seconds",
		"Unix time of the last successful sync to the replica.", nil, nil)
)

func (c *replicationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- replicationUpDesc
	ch <- replicationLagDesc
	ch <- replicationLastSyncDesc
}

func (c *replicationCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.status
	c.mu.Unlock()
	if f == nil {
		return
	}
	type result struct {
		lag      time.Duration
		lastSync time.Time
		ok       bool
	}
	done := make(chan result, 1)
	go func() {
		lag, last, ok := f()
		done <- result{lag, last, ok}
	}()
	var r result
	timedOut := false
	select {
	case r = <-done:
	case <-time.After(c.timeout):
		timedOut = true
	}
	up := 0.0
	if r.ok && !timedOut {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(replicationUpDesc, prometheus.GaugeValue, up)
	if timedOut {
		return
	}
	ch <- prometheus.MustNewConstMetric(replicationLagDesc, prometheus.GaugeValue, r.lag.Seconds())
	if !r.lastSync.IsZero() {
		ch <- prometheus.MustNewConstMetric(replicationLastSyncDesc, prometheus.GaugeValue,
			float64(r.lastSync.UnixNano())/1e9)
	}
}
