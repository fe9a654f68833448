package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookledger/hookledger/schema"
)

// Forwarding outcomes (forward.Outcome*), exported from the first scrape at 0.
var forwardOutcomes = []string{"delivered", "retry", "dead"}

// Forward holds the forwarding relay's metrics: attempts counted as they
// finish, the outbox's backlog read at scrape time.
type Forward struct {
	deliveries *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	limit      *prometheus.GaugeVec
	dests      map[string]bool
}

var (
	forwardPendingDesc = prometheus.NewDesc(Namespace+"_forward_pending",
		"Outbox messages waiting to be delivered, by destination.", []string{"destination"}, nil)
	forwardDeadDesc = prometheus.NewDesc(Namespace+"_forward_dead",
		"Outbox messages that are dead (retries exhausted; kept until `hookledger forward retry`), by destination.", []string{"destination"}, nil)
	forwardOldestDesc = prometheus.NewDesc(Namespace+"_forward_oldest_pending_age_seconds",
		"Age of the oldest pending outbox message by destination (since it became pending); 0 when there is none.", []string{"destination"}, nil)
	forwardUpDesc = prometheus.NewDesc(Namespace+"_forward_stats_up",
		"1 when the scrape-time outbox queries succeeded, else 0 (the outbox gauges are then missing).", nil, nil)
)

// WatchForward registers the forwarding metrics for destinations, with the
// outbox gauges read at scrape time from db's read pool. Call it once; nil
// Metrics returns nil (whose methods do nothing).
func (m *Metrics) WatchForward(db snapshotter, destinations []string, log *slog.Logger) *Forward {
	if m == nil {
		return nil
	}
	f := &Forward{dests: map[string]bool{}}
	f.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "forward", Name: "attempts_total",
		Help: "Forwarding attempts by destination and outcome: delivered (2xx), retry (failed, will be retried) or dead (failed, retries exhausted).",
	}, []string{"destination", "outcome"})
	f.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "forward", Name: "attempt_duration_seconds",
		Help:    "Duration of one forwarding attempt (request sent to response read, or the error), by destination.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"destination"})
	f.limit = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "forward", Name: "concurrency_limit",
		Help: "How many requests the relay lets be in flight to a destination now: from its concurrency up to its max_concurrency, raised while messages wait and answers are healthy, halved on errors (docs/forwarding.md).",
	}, []string{"destination"})
	for _, d := range destinations {
		f.dests[d] = true
		for _, o := range forwardOutcomes {
			f.deliveries.WithLabelValues(d, o)
		}
		f.latency.WithLabelValues(d)
	}
	m.Registry.MustRegister(f.deliveries, f.latency, f.limit,
		&forwardCollector{db: db, dests: destinations, now: time.Now, timeout: DBStatsTimeout, log: log})
	return f
}

// ObserveAttempt counts one finished attempt.
func (f *Forward) ObserveAttempt(destination, outcome string, latency time.Duration) {
	if f == nil || !f.dests[destination] {
		return
	}
	f.deliveries.WithLabelValues(destination, outcome).Inc()
	f.latency.WithLabelValues(destination).Observe(latency.Seconds())
}

// SetConcurrencyLimit sets a destination's current concurrency limit.
func (f *Forward) SetConcurrencyLimit(destination string, limit int) {
	if f == nil || !f.dests[destination] {
		return
	}
	f.limit.WithLabelValues(destination).Set(float64(limit))
}

type forwardCollector struct {
	db      snapshotter
	dests   []string
	now     func() time.Time
	timeout time.Duration
	log     *slog.Logger
}

func (c *forwardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- forwardPendingDesc
	ch <- forwardDeadDesc
	ch <- forwardOldestDesc
	ch <- forwardUpDesc
}

func (c *forwardCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	gauges := make([]schema.OutboxGauges, len(c.dests))
	err := c.db.View(ctx, func(tx *schema.ReadTx) error {
		for i, d := range c.dests {
			var err error
			if gauges[i], err = tx.OutboxGauges(ctx, d); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if c.log != nil {
			c.log.Warn("metrics: outbox stats", "error", err.Error())
		}
		ch <- prometheus.MustNewConstMetric(forwardUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(forwardUpDesc, prometheus.GaugeValue, 1)
	for i, d := range c.dests {
		g := gauges[i]
		age := 0.0
		if g.OldestPending.Valid {
			age = max(0, c.now().Sub(time.UnixMilli(g.OldestPending.Int64)).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(forwardPendingDesc, prometheus.GaugeValue, float64(g.Pending), d)
		ch <- prometheus.MustNewConstMetric(forwardDeadDesc, prometheus.GaugeValue, float64(g.Dead), d)
		ch <- prometheus.MustNewConstMetric(forwardOldestDesc, prometheus.GaugeValue, age, d)
	}
}
