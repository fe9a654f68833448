package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a scheduled close, exported from the first scrape at 0:
// closed (this serve closed the period), existing (it was already closed,
// by another receiver or by `invoice close --all`), error.
var InvoiceCloseOutcomes = []string{"closed", "existing", "error"}

// Invoicing holds the metrics of serve's scheduled closes (invoicing:).
type Invoicing struct {
	closes        *prometheus.CounterVec
	lastClose     prometheus.Gauge
	closedThrough prometheus.Gauge
	excluded      prometheus.Gauge
}

// WatchInvoicing registers the scheduled-close metrics. Call it once, only
// when invoicing is configured; nil Metrics returns nil (whose methods do
// nothing).
func (m *Metrics) WatchInvoicing() *Invoicing {
	if m == nil {
		return nil
	}
	in := &Invoicing{
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "invoice", Name: "scheduled_closes_total",
			Help: "Period closes serve attempted on its schedule (invoicing.close), by outcome: closed, existing (already closed elsewhere), error.",
		}, []string{"outcome"}),
		lastClose: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "invoice", Name: "last_close_timestamp_seconds",
			Help: "Unix time at which the latest close for all customers was made (by the schedule or invoice close --all); 0 before the first.",
		}),
		closedThrough: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "invoice", Name: "closed_through_timestamp_seconds",
			Help: "End of the latest period closed for all customers, as Unix time; 0 before the first. Behind by more than a period plus the grace: closes are failing.",
		}),
		excluded: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "invoice", Name: "excluded_customers",
			Help: "Customers a close for all customers could not invoice and no close of theirs has since (each tried again at every check); above 0, the WARN scheduled close lines say why.",
		}),
	}
	for _, o := range InvoiceCloseOutcomes {
		in.closes.WithLabelValues(o)
	}
	m.Registry.MustRegister(in.closes, in.lastClose, in.closedThrough, in.excluded)
	return in
}

// ObserveClose counts one scheduled close; outcome is one of
// InvoiceCloseOutcomes.
func (in *Invoicing) ObserveClose(outcome string) {
	if in == nil {
		return
	}
	in.closes.WithLabelValues(outcome).Inc()
}

// SetLatest records the latest close for all customers: when it was made
// and the end of its period. serve reads it from the database at every
// check, so the gauges are right after a restart too.
func (in *Invoicing) SetLatest(closedAt, periodEnd time.Time) {
	if in == nil {
		return
	}
	in.lastClose.Set(float64(closedAt.UnixMilli()) / 1000)
	in.closedThrough.Set(float64(periodEnd.UnixMilli()) / 1000)
}

// SetExcluded records how many customers closes for all could not invoice
// and are still not invoiced (invoice.OpenExclusions).
func (in *Invoicing) SetExcluded(n int) {
	if in == nil {
		return
	}
	in.excluded.Set(float64(n))
}
