package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/reconcile"
	"github.com/hookledger/hookledger/schema"
)

// creditExpiryInterval is how often serve writes the expiry rows of the
// credit grants whose expiry has passed. A close never applies a grant
// past its expiry whether or not its row is written yet (invoice.Grant's
// applies), so the interval only bounds how long the credits views show
// one expired before the ledger says what it forfeited.
const creditExpiryInterval = time.Minute

// startBackground runs serve's periodic jobs: reconcile for each provider
// with reconcile.interval set, prune when retention is configured, credit
// expiry (expireCredits) always, and the scheduled invoice closes when
// invoicing.close is set (invoicing.go). Each runs once at start, then
// every interval. stop cancels them and waits, and must be called before
// the writer closes (reconcile, prune and expiry submit to it) and before
// the database closes (a close holds the write connection while
// it runs; cancelled, it rolls back).
func startBackground(ctx context.Context, log *slog.Logger, cfg *config.Config, db *schema.DB, w *custody.Writer,
	m *ledger.Mapper, version string, met *metrics.Metrics) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// repeat runs job now and every d; every also logs that it does. The
	// configured jobs announce themselves; credit expiry, always on, does
	// not (it logs what it expires).
	repeat := func(d time.Duration, job func(context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				job(ctx)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	every := func(name string, d time.Duration, job func(context.Context)) {
		repeat(d, job)
		log.Info("background job", "job", name, "every", d.String())
	}
	for _, p := range cfg.Providers {
		if p.Reconcile == nil || p.Reconcile.Interval.Duration <= 0 {
			continue
		}
		r, err := reconcile.ForProvider(p, nil, reconcile.Reconciler{DB: db, Writer: w, Mapper: m, HandlerVersion: version, Log: log})
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		every("reconcile "+p.Name, p.Reconcile.Interval.Duration, func(ctx context.Context) {
			rep, err := r.Run(ctx, reconcile.Options{})
			if ctx.Err() == nil {
				met.ReconcileRun(p.Name, rep.Inserted, err)
			}
			attrs := []any{"provider", rep.Provider, "seen", rep.Seen, "already_present", rep.AlreadyPresent, "inserted", rep.Inserted,
				"redelivery_requested", rep.RedeliveryRequested, "redelivery_pending", rep.RedeliveryPending, "failed", rep.Failed}
			if err != nil && ctx.Err() == nil {
				log.Warn("reconcile", append(attrs, "error", err.Error())...)
			} else if err == nil {
				log.Info("reconcile", attrs...)
			}
		})
	}
	if ret := cfg.Retention; ret.Enabled() {
		policy := reconcile.Retention{Payload: ret.Payload.Duration, Keys: ret.Keys.Duration, Delivered: ret.Delivered.Duration}
		every("prune", ret.Interval.Duration, func(ctx context.Context) {
			rep, err := reconcile.Prune(ctx, db, w, policy, time.Now(), false)
			attrs := []any{"bodies_pruned", rep.BodiesPruned, "keys_deleted", rep.KeysDeleted, "failed_kept", rep.FailedKept}
			if policy.Delivered > 0 {
				attrs = append(attrs, "delivered_pruned", rep.DeliveredPruned)
			}
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("prune", append(attrs, "error", err.Error())...)
			case err == nil && rep.TamperedKept > 0:
				log.Error("prune", append(attrs, "tampered_kept", rep.TamperedKept,
					"error", "receipts whose stored body no longer matches its digest were kept, not pruned: run hookledger verify")...)
			case err == nil:
				log.Info("prune", attrs...)
			}
		})
	}
	repeat(creditExpiryInterval, func(ctx context.Context) { expireCredits(ctx, log, w) })
	if cfg.Invoicing.Enabled() {
		sched := &invoiceScheduler{DB: db, Config: cfg, Log: log, Metrics: met.WatchInvoicing(), Now: time.Now}
		every("invoice close "+cfg.Invoicing.Close+" in "+cfg.Invoicing.TZ+" after "+cfg.Invoicing.Grace.String(), closeCheckInterval, sched.check)
	}
	return func() { cancel(); wg.Wait() }, nil
}

// expireCredits writes the expiry row of every grant whose expiry has
// passed (custody.ExpireCredits: once per grant, so serves sharing a
// PostgreSQL database write each row once), and logs each.
func expireCredits(ctx context.Context, log *slog.Logger, w interface {
	Submit(context.Context, custody.Op) error
}) {
	op := &custody.ExpireCredits{}
	err := w.Submit(ctx, op)
	if err == nil || errors.Is(err, custody.ErrNotReplicated) { // committed here
		for _, e := range op.Entries {
			log.Info("credit expired", "grant", e.GrantID, "customer", e.Customer, "forfeited", e.Amount, "currency", e.Currency)
		}
	}
	if err != nil && ctx.Err() == nil {
		log.Warn("credit expiry", "error", err.Error())
	}
}
