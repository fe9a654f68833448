// Package metrics exposes hookledger's Prometheus metrics. The hot path only
// bumps counters and histograms; everything that needs the database (receipts
// by status, the oldest failed receipt, ledger rows) is read at scrape time by
// a collector on the read pool, so a slow scrape never slows a delivery.
package metrics

import (
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookledger/hookledger/custody"
)

// Namespace prefixes every hookledger metric.
const Namespace = "hookledger"

// UnknownProvider is the provider label of deliveries to a provider that is
// not configured. The path segment is attacker-controlled: using it as a label
// would let anyone create unbounded time series.
const UnknownProvider = "_unknown"

// Delivery outcomes counted even before they first happen, so rate() and
// ratios have a series from the first scrape.
var acceptedOutcomes = []string{string(custody.OutcomeInserted), string(custody.OutcomeDuplicate), string(custody.OutcomePayloadMismatch)}

// Options describe the process being measured.
type Options struct {
	// Providers are the configured provider names; any other provider label
	// is recorded as UnknownProvider.
	Providers []string
	Version   string
	Commit    string
}

// Metrics holds hookledger's collectors and the registry that serves them.
// Its methods are safe for concurrent use, and safe on a nil *Metrics (they
// do nothing), so a component can take an optional *Metrics.
type Metrics struct {
	Registry *prometheus.Registry

	providers map[string]bool

	deliveries      *prometheus.CounterVec
	deliveryLatency *prometheus.HistogramVec
	batchSize       prometheus.Histogram
	commitLatency   prometheus.Histogram
	queueCapacity   prometheus.Gauge
	storageErrors   *prometheus.CounterVec

	reconcileRuns        *prometheus.CounterVec
	reconcileInserted    *prometheus.CounterVec
	reconcileLastSuccess *prometheus.GaugeVec

	tlsReloads  *prometheus.CounterVec
	tlsNotAfter prometheus.Gauge
	tlsOnce     sync.Once

	replication *replicationCollector
	dbc         *dbCollector
}

// New registers hookledger's metrics, the Go runtime and process collectors
// and a build-info gauge on a fresh registry.
func New(opts Options) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{Registry: reg, providers: map[string]bool{}}
	for _, p := range opts.Providers {
		m.providers[p] = true
	}
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "deliveries_total",
		Help: "Webhook delivery attempts by provider and outcome (inserted, duplicate, payload_mismatch, rejected, url_verification); reason says why a delivery was rejected.",
	}, []string{"provider", "outcome", "reason"})
	m.deliveryLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "delivery_duration_seconds",
		Help:    "Time from receiving a webhook request to its reply being ready, including the wait for the durable commit.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"provider", "outcome"})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "writer", Name: "batch_size",
		Help:    "Items committed per writer transaction (group commit: one fsync for the whole batch).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1 … 512, the default batch cap
	})
	m.commitLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "writer", Name: "commit_duration_seconds",
		Help:    "Duration of the writer's COMMIT (the fsync) per batch.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	m.queueCapacity = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "writer", Name: "queue_capacity",
		Help: "Capacity of the writer queue; beyond it deliveries get 503 with Retry-After.",
	})
	m.storageErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "storage_errors_total",
		Help: "Storage failures in the writer by op: begin, commit, savepoint, push, save usage state, save chain head (the whole batch failed) or delivery (one delivery's writes failed); each is a 503. A full disk or an I/O error shows here first.",
	}, []string{"op"})
	m.reconcileRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "reconcile", Name: "runs_total",
		Help: "Reconciliation runs by provider and result (ok, error).",
	}, []string{"provider", "result"})
	m.reconcileInserted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "reconcile", Name: "inserted_events_total",
		Help: "Events that reconciliation found missing and inserted, by provider.",
	}, []string{"provider"})
	m.reconcileLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "reconcile", Name: "last_success_timestamp_seconds",
		Help: "Unix time of the last successful reconciliation run, by provider.",
	}, []string{"provider"})
	m.tlsReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "tls", Name: "reloads_total",
		Help: "Certificate reloads (SIGHUP) by result (ok, error); on error the previous certificate stays in use.",
	}, []string{"result"})
	m.tlsNotAfter = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "tls", Name: "certificate_expiry_timestamp_seconds",
		Help: "Unix time at which the served TLS certificate expires.",
	})
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1; labels carry the version, commit and Go version of the running binary.",
	}, []string{"version", "commit", "goversion"})
	buildInfo.WithLabelValues(opts.Version, opts.Commit, runtime.Version()).Set(1)
	m.replication = &replicationCollector{timeout: replicationTimeout}

	reg.MustRegister(m.deliveries, m.deliveryLatency, m.batchSize, m.commitLatency, m.queueCapacity, m.storageErrors,
		m.reconcileRuns, m.reconcileInserted, m.reconcileLastSuccess, buildInfo, m.replication,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)

	for _, op := range StorageOps {
		m.storageErrors.WithLabelValues(op)
	}
	for _, p := range opts.Providers {
		for _, o := range acceptedOutcomes {
			m.deliveries.WithLabelValues(p, o, "")
		}
		// The ingest API's events (provider "api:*") are refused for a
		// key, never for a signature.
		reason := "bad_signature"
		if strings.HasPrefix(p, "api:") {
			reason = "unknown_key"
		}
		m.deliveries.WithLabelValues(p, "rejected", reason)
	}
	return m
}

// Handler serves the registry in the Prometheus exposition formats. A failing
// collector (say, the database stats timing out) drops only its own metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.Registry, // counts its own errors in promhttp_metric_handler_errors_total
	})
}

// ObserveDelivery records one webhook delivery attempt. reason is empty unless
// the delivery was rejected.
func (m *Metrics) ObserveDelivery(provider, outcome, reason string, latency time.Duration) {
	if m == nil {
		return
	}
	if !m.providers[provider] {
		provider = UnknownProvider
	}
	m.deliveries.WithLabelValues(provider, outcome, reason).Inc()
	m.deliveryLatency.WithLabelValues(provider, outcome).Observe(latency.Seconds())
}

// ObserveBatch records one committed writer batch; it matches
// custody.Writer.AfterBatch.
func (m *Metrics) ObserveBatch(size int, commit time.Duration) {
	if m == nil {
		return
	}
	m.batchSize.Observe(float64(size))
	m.commitLatency.Observe(commit.Seconds())
}

// StorageOps are the op labels of hookledger_storage_errors_total
// (custody.Writer.OnStorageError), exported from the first scrape at 0.
var StorageOps = []string{"begin", "commit", "savepoint", "delivery"}

// StorageError counts one storage failure in the writer; op is one of
// StorageOps.
func (m *Metrics) StorageError(op string) {
	if m == nil {
		return
	}
	m.storageErrors.WithLabelValues(op).Inc()
}

// WatchWriterQueue exports the writer queue's depth, read at scrape time from
// depth (custody.Writer.Depth), and its capacity. Call it once.
func (m *Metrics) WatchWriterQueue(depth func() int, capacity int) {
	if m == nil {
		return
	}
	m.queueCapacity.Set(float64(capacity))
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "writer", Name: "queue_depth",
		Help: "Items waiting in the writer queue.",
	}, func() float64 { return float64(depth()) }))
}

// ReconcileRun records one reconciliation run for provider: err == nil is a
// success. inserted is the number of missing events it inserted.
func (m *Metrics) ReconcileRun(provider string, inserted int, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.reconcileRuns.WithLabelValues(provider, result).Inc()
	m.reconcileInserted.WithLabelValues(provider).Add(float64(inserted))
	if err == nil {
		m.reconcileLastSuccess.WithLabelValues(provider).SetToCurrentTime()
	}
}

// SetTLSCertificate records the expiry of the certificate now being served.
// The TLS metrics exist only once a certificate has been loaded.
func (m *Metrics) SetTLSCertificate(notAfter time.Time) {
	if m == nil {
		return
	}
	m.registerTLS()
	m.tlsNotAfter.Set(float64(notAfter.Unix()))
}

// TLSReload records one certificate reload (SIGHUP); err != nil means the
// previous certificate stays in use.
func (m *Metrics) TLSReload(err error) {
	if m == nil {
		return
	}
	m.registerTLS()
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.tlsReloads.WithLabelValues(result).Inc()
}

func (m *Metrics) registerTLS() {
	m.tlsOnce.Do(func() {
		m.Registry.MustRegister(m.tlsReloads, m.tlsNotAfter)
		m.tlsReloads.WithLabelValues("ok")
		m.tlsReloads.WithLabelValues("error")
	})
}
