package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/payload"
)

// StripeDestination is the outbox destination of Stripe pushes: their
// messages, status, pause and retry go by this name (forward status,
// forward pause stripe …).
const StripeDestination = "stripe"

// StripeInvoicesDestination is the outbox destination of the invoices sent
// to Stripe (stripe.invoices): its own worker, backoff and pause, so a slow
// invoice never holds the meter events back.
const StripeInvoicesDestination = "stripe-invoices"

// Collection methods of a Stripe invoice.
const (
	ChargeAutomatically = "charge_automatically"
	SendInvoice         = "send_invoice"
)

// DefaultDaysUntilDue is how long a send_invoice invoice gives the customer.
const DefaultDaysUntilDue = 30

// Customer mappings: how hookledger's customer id becomes Stripe's.
const (
	StripeIdentity = "identity" // the same id (hookledger's customers are cus_… already)
	StripeLink     = "link"     // the registry's external id stripe (customers link C --stripe cus_…)
)

// DefaultStripeAPIBase is Stripe's API.
const DefaultStripeAPIBase = "https://api.stripe.com"

// Defaults of the Stripe sync's pace (docs/stripe.md): a customer and meter
// are pushed at most once an interval; the calls of all of them go at most
// DefaultStripeRate a second (a tenth of what Stripe's meter events take,
// 1,000/s; its limit for its other endpoints, 100/s), DefaultStripeConcurrency
// customers and meters at once (each pair one call at a time, as Stripe
// asks).
const (
	DefaultStripeInterval    = time.Second
	DefaultStripeRate        = 100
	DefaultStripeConcurrency = 16
)

// Stripe is the billing sync to Stripe (docs/stripe.md): each meter with
// stripe settings is pushed as meter events through the outbox. The
// delivery keys are a destination's (docs/forwarding.md), with the same
// defaults.
type Stripe struct {
	// APIKey is a secret key (sk_… or a restricted rk_… with write access
	// to meter events), from a variable or a secret_file; never logged.
	APIKey Secret `yaml:"api_key"`
	// APIBase is where requests go: Stripe, or stripe-mock and fakes in
	// tests. Default DefaultStripeAPIBase.
	APIBase string `yaml:"api_base"`
	// Customers maps hookledger's customer id to Stripe's: identity, link,
	// or a JSON path in the event (e.g. data.object.customer).
	Customers string `yaml:"customers"`
	// Interval is how often the relay pushes one customer and meter at
	// most: what they gathered meanwhile goes as one meter event. Default
	// DefaultStripeInterval.
	Interval Duration `yaml:"interval"`
	// Invoices, when enabled, makes every closed, priced invoice a Stripe
	// invoice: Stripe charges the money hookledger computed.
	Invoices *StripeInvoices `yaml:"invoices"`

	Timeout     Duration   `yaml:"timeout"`
	MaxAttempts int        `yaml:"max_attempts"`
	MaxAge      Duration   `yaml:"max_age"`
	Backoff     Duration   `yaml:"backoff"`
	MaxBackoff  Duration   `yaml:"max_backoff"`
	Concurrency int        `yaml:"concurrency"`
	RateLimit   *RateLimit `yaml:"rate_limit"`
}

// StripeInvoices is stripe.invoices (docs/stripe.md#invoices-when-hookledger-prices).
type StripeInvoices struct {
	Enabled bool `yaml:"enabled"`
	// CollectionMethod is charge_automatically (default: Stripe charges
	// the customer's default payment method) or send_invoice (Stripe
	// emails the invoice, due DaysUntilDue days later).
	CollectionMethod string `yaml:"collection_method"`
	DaysUntilDue     int    `yaml:"days_until_due"`
	// Finalize (default true) finalizes each invoice once its items are
	// in; false leaves it a draft for a person to review and finalize.
	Finalize *bool `yaml:"finalize"`
}

// InvoicesOn reports whether closed invoices are sent to Stripe.
func (s *Stripe) InvoicesOn() bool { return s != nil && s.Invoices != nil && s.Invoices.Enabled }

// InvoicesDestination is the outbox destination the relay sends invoices
// through: the delivery keys of stripe:, under its own name.
func (s *Stripe) InvoicesDestination() Destination {
	d := s.Destination()
	d.Name = StripeInvoicesDestination
	return d
}

// Destination is the outbox destination the relay delivers pushes through.
func (s *Stripe) Destination() Destination {
	return Destination{Name: StripeDestination, URL: s.APIBase, Timeout: s.Timeout, MaxAttempts: s.MaxAttempts, MaxAge: s.MaxAge,
		Backoff: s.Backoff, MaxBackoff: s.MaxBackoff, Concurrency: s.Concurrency, RateLimit: s.RateLimit}
}

// CustomerPath is the JSON path of the Stripe customer in the event, when
// Customers is neither identity nor link.
func (s *Stripe) CustomerPath() string {
	if s.Customers == StripeIdentity || s.Customers == StripeLink {
		return ""
	}
	return s.Customers
}

// StripeMeters are the meters pushed to Stripe, by name.
func (c *Config) StripeMeters() map[string]ledger.StripeMeter {
	out := map[string]ledger.StripeMeter{}
	for _, m := range c.Meters {
		if m.Stripe != nil {
			out[m.Name] = *m.Stripe
		}
	}
	return out
}

// resolveStripe validates stripe: and the meters' stripe settings, after
// the meters, section by section.
func (c *Config) resolveStripe(dir string) error {
	s := c.Stripe
	pushed, err := c.stripeMeters()
	if err != nil {
		return err
	}
	if s == nil {
		if pushed {
			return errAt("stripe", "meters push to Stripe: add stripe: {api_key: …, customers: …}")
		}
		return nil
	}
	for _, d := range c.Destinations {
		if d.Name == StripeDestination || d.Name == StripeInvoicesDestination {
			return errAt("destinations", "the destination name %q is the Stripe sync's", d.Name)
		}
	}
	if err := s.APIKey.read(dir, "stripe.api_key"); c.leaveOut(err) {
		s.APIKey = Secret{}
	} else if err != nil {
		return err
	}
	for _, step := range []func() error{s.resolveBase, c.resolveCustomers, s.resolvePace, s.Invoices.resolve, s.resolveDelivery} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// stripeMeters checks the meters' stripe settings: Stripe keeps one meter
// per event name and per meter id. pushed says whether anything goes to
// Stripe (a meter, or invoices).
func (c *Config) stripeMeters() (pushed bool, err error) {
	pushed = c.Stripe.InvoicesOn()
	events, ids := map[string]string{}, map[string]string{}
	for i, m := range c.Meters {
		if m.Stripe == nil {
			continue
		}
		pushed = true
		if other, ok := events[m.Stripe.EventName]; ok {
			return false, errAt(fmt.Sprintf("meters[%d].stripe.event_name", i), "%q is meter %s's event name too", m.Stripe.EventName, other)
		}
		events[m.Stripe.EventName] = m.Name
		if id := m.Stripe.MeterID; id != "" {
			if other, ok := ids[id]; ok {
				return false, errAt(fmt.Sprintf("meters[%d].stripe.meter_id", i), "%q is meter %s's meter id too", id, other)
			}
			ids[id] = m.Name
		}
	}
	return pushed, nil
}

// resolveBase checks stripe.api_base (default Stripe's API).
func (s *Stripe) resolveBase() error {
	if s.APIBase == "" {
		s.APIBase = DefaultStripeAPIBase
	}
	u, err := url.Parse(s.APIBase)
	switch {
	case err == nil && u.User != nil:
		// Not echoed: what stands before the @ may be a key.
		return errAt("stripe.api_base", "must not carry credentials (the key goes in api_key)")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errAt("stripe.api_base", "%q is not an http or https URL", s.APIBase)
	}
	s.APIBase = strings.TrimRight(s.APIBase, "/")
	return nil
}

// resolveCustomers checks stripe.customers: a JSON path needs an event to
// read it in, which an invoice line (close mode) and an invoice do not
// have.
func (c *Config) resolveCustomers() error {
	s := c.Stripe
	switch {
	case s.Customers == "":
		return errAt("stripe.customers", "required: identity, link, or a JSON path in the event (e.g. data.object.customer)")
	case s.Customers == StripeIdentity || s.Customers == StripeLink:
		return nil
	}
	// Read with payload.Get, as the mappings' paths are.
	if err := payload.CheckPath(s.Customers); err != nil {
		return errAt("stripe.customers", "%q is not identity, link or a JSON path: %v", s.Customers, err)
	}
	for i, m := range c.Meters {
		if m.Stripe != nil && m.Stripe.Mode == ledger.StripeClose {
			return errAt(fmt.Sprintf("meters[%d].stripe.mode", i), "close mode needs stripe.customers identity or link (a line has no event to read %s in)", s.Customers)
		}
	}
	if s.InvoicesOn() {
		return errAt("stripe.invoices", "invoices need stripe.customers identity or link (an invoice has no event to read %s in)", s.Customers)
	}
	return nil
}

// resolvePace checks stripe.interval and fills the pace's defaults: the
// interval, the rate limit, the concurrency.
func (s *Stripe) resolvePace() error {
	if err := s.Interval.Check(); err != nil {
		return errAt("stripe.interval", "%v", err)
	}
	switch {
	case s.Interval.Duration == 0:
		s.Interval.Duration = DefaultStripeInterval
	case s.Interval.Duration > time.Hour:
		return errAt("stripe.interval", "%s: at most 1h (usage waits that long to reach Stripe)", s.Interval.Duration)
	}
	if s.RateLimit == nil {
		s.RateLimit = &RateLimit{PerSecond: DefaultStripeRate, Burst: DefaultStripeRate / 10}
	}
	if s.Concurrency == 0 {
		s.Concurrency = DefaultStripeConcurrency
	}
	return nil
}

// resolveDelivery checks the delivery keys a destination has, with their
// defaults, and Stripe's 35 days.
func (s *Stripe) resolveDelivery() error {
	d := s.Destination()
	if err := d.delivery("stripe"); err != nil {
		return err
	}
	s.Timeout, s.MaxAttempts, s.MaxAge, s.Backoff, s.MaxBackoff, s.Concurrency, s.RateLimit =
		d.Timeout, d.MaxAttempts, d.MaxAge, d.Backoff, d.MaxBackoff, d.Concurrency, d.RateLimit
	if s.MaxAge.Duration > 35*24*time.Hour {
		return errAt("stripe.max_age", "%s: Stripe takes no event older than 35 days", s.MaxAge.Duration)
	}
	return nil
}

// resolve checks stripe.invoices and fills its defaults.
func (inv *StripeInvoices) resolve() error {
	if inv == nil {
		return nil
	}
	switch inv.CollectionMethod {
	case "":
		inv.CollectionMethod = ChargeAutomatically
	case ChargeAutomatically, SendInvoice:
	default:
		return errAt("stripe.invoices.collection_method", "%q is not charge_automatically or send_invoice", inv.CollectionMethod)
	}
	switch {
	case inv.DaysUntilDue < 0 || inv.DaysUntilDue > 365:
		return errAt("stripe.invoices.days_until_due", "%d: between 1 and 365 days", inv.DaysUntilDue)
	case inv.DaysUntilDue == 0:
		inv.DaysUntilDue = DefaultDaysUntilDue
	}
	if inv.Finalize == nil {
		on := true
		inv.Finalize = &on
	}
	return nil
}

// OutboxDestinations are the destinations with outbox messages: those of
// destinations: and, when configured, Stripe's.
func (c *Config) OutboxDestinations() []Destination {
	ds := append([]Destination(nil), c.Destinations...)
	if c.Stripe != nil {
		ds = append(ds, c.Stripe.Destination())
		if c.Stripe.InvoicesOn() {
			ds = append(ds, c.Stripe.InvoicesDestination())
		}
	}
	return ds
}
