package server

import (
	"context"

	"github.com/hookledger/hookledger/console"
	"github.com/hookledger/hookledger/dispute"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/ledger"
)

// mountConsole serves the web console at /ui/ on the admin listener (package
// console): it signs in with the admin tokens and reads only. tally counts
// the deliveries the database does not hold (rejected, duplicates).
func (s *Server) mountConsole(tally *console.Tally, limits console.Entitlements) error {
	v, err := dispute.NewVerifier(s.Config.Providers)
	if err != nil {
		return err
	}
	meters := ledger.NewMeters(s.Config.Meters)
	c := &console.Console{
		DB:           s.db,
		Tracer:       &dispute.Tracer{DB: s.db, Verifier: v, Meters: meters},
		Meters:       meters,
		Authorized:   s.adm.Authorized,
		Destinations: forward.Names(s.Config.OutboxDestinations()),
		Secrets:      forward.Secrets(s.Config),
		DefaultPlan:  s.Config.Customers.DefaultPlan,
		Catalog:      s.Config.Catalog,
		Entitlements: limits,
		Stripe:       s.Config.Stripe != nil,
		Zone:         s.Config.Invoicing.Location,
		Tally:        tally,
		Log:          s.Log,
		Replication:  s.repl.consoleStatus(),
	}
	if c.Replication == nil {
		c.NotReplicating = s.Replication.OffReason
	}
	s.adm.Console = c.Handler()
	return nil
}

// consoleStatus is what the console's overview shows of replication (nil
// when not replicating): the state serve's periodic listing last found.
func (s *serveReplication) consoleStatus() func() console.Replication {
	if s == nil {
		return nil
	}
	return func() console.Replication {
		s.mu.Lock()
		st := s.status
		s.mu.Unlock()
		r := console.Replication{Enabled: true, Replica: s.cfg.DB.Replica.String(), Lag: st.LagTime, LastSync: st.LastSyncAt, Healthy: true}
		if err := s.check(context.Background()); err != nil {
			r.Healthy, r.Error = false, err.Error()
		}
		return r
	}
}
