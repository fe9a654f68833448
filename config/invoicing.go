package config

import (
	"time"

	"github.com/hookledger/hookledger/ledger"
)

// Invoicing schedules closes: with close set, serve closes each ended
// period for every customer itself, once its grace has passed (the same
// close as `hookledger invoice close --all`). Absent, periods are closed only
// by hand; tz alone still names the zone they are closed in.
type Invoicing struct {
	// Close is the schedule: "monthly" (calendar months in TZ); "" is off.
	Close string `yaml:"close"`
	// TZ is the IANA zone whose months are closed; default UTC. It is also
	// the zone every command reads periods in when --tz is not given
	// (invoice close and preview, usage, adjust, void, dispute), the
	// console's and the entitlement checks' zone, with or without Close.
	TZ string `yaml:"tz"`
	// Grace is how long after a period's end serve waits before closing it,
	// so deliveries in flight, retried or reconciled still land on the
	// period's invoice; default DefaultInvoicingGrace.
	Grace Duration `yaml:"grace"`

	// Location is TZ, resolved (set by resolve).
	Location *time.Location `yaml:"-"`
}

// InvoicingMonthly is the schedule invoicing.close accepts: calendar months.
const InvoicingMonthly = "monthly"

// DefaultInvoicingGrace is the default wait after a period's end: the
// default reconcile window (DefaultReconcileWindow), so an event reconcile
// can still find is on the invoice of its own period rather than billed
// late on the next.
const DefaultInvoicingGrace = DefaultReconcileWindow

// Enabled reports whether serve closes periods itself.
func (in Invoicing) Enabled() bool { return in.Close != "" }

// resolveInvoicing validates the invoicing section and fills its defaults.
func (c *Config) resolveInvoicing() error {
	in := &c.Invoicing
	if err := in.Grace.Check(); err != nil {
		return errAt("invoicing.grace", "%v", err)
	}
	switch in.Close {
	case InvoicingMonthly:
	case "":
		if in.Grace.Duration != 0 {
			return errAt("invoicing.close", "required with grace: set close: monthly for serve to close periods itself, "+
				"or remove grace (hookledger invoice close takes --grace)")
		}
		if in.TZ == "" {
			return nil
		}
	default:
		return errAt("invoicing.close", "%q is not a schedule: want monthly (or leave close out and close periods with hookledger invoice close)", in.Close)
	}
	loc, err := ledger.LoadZone(in.TZ)
	if err != nil {
		return errAt("invoicing.tz", "%v", err)
	}
	in.Location = loc
	if in.TZ == "" {
		in.TZ = "UTC"
	}
	if !in.Enabled() {
		return nil
	}
	if in.Grace.Duration == 0 {
		in.Grace.Duration = DefaultInvoicingGrace
	}
	return nil
}
