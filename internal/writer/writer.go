// Package writer builds the one writer hookledger writes through, with
// every product hook its configuration asks for: serve, every command that
// writes and the test environment take it from New, so a hook added to the
// writer is wired once, here, and no command can leave one out.
//
// The hooks are the product's effects that must commit with what causes
// them (DESIGN.md, invariant 7): a new event's outbox messages (forward), a
// ledger row's Stripe push and an event's Stripe reports (stripe), a usage
// row's threshold and credit alerts (entitle). The process's own hooks
// (metrics, the relay's kick, replication's acknowledgement and admission)
// are serve's, set on the writer New returns.
package writer

import (
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

// New is a writer for db with the hooks cfg configures; open it before
// use. A nil cfg wires none: a bulk loader's writer (test and benchmark
// data, which have no configuration to route, push or alert by).
func New(db *schema.DB, cfg *config.Config) *custody.Writer {
	w := custody.NewWriter(db)
	if cfg == nil {
		return w
	}
	w.Route = forward.Router(cfg.Destinations)                           // a new event's outbox messages
	w.Push = stripe.NewSync(cfg).Pusher()                                // a stream meter's row is pushed to Stripe
	w.Receipt = stripe.Reports(cfg)                                      // Stripe's error reports, linked to the pushes they name
	w.Limits = entitle.NewPolicy(cfg.Catalog, cfg.Customers.DefaultPlan) // threshold alerts, decided in the row's transaction
	w.Limits.CreditAlerts = cfg.CreditAlerts()                           // credit alerts, decided there too
	return w
}
