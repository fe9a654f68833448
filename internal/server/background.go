package server

import (
	"context"
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

// startBackground runs serve's periodic jobs: reconcile for each provider
// with reconcile.interval set, prune when retention is configured, and the
// scheduled invoice closes when invoicing.close is set (invoicing.go). Each
// runs once at start, then every interval. stop cancels them and waits, and
// must be called before the writer closes (reconcile and prune submit to it)
// and before the database closes (a close holds the write connection while
// it runs; cancelled, it rolls back).
func startBackground(ctx context.Context, log *slog.Logger, cfg *config.Config, db *schema.DB, w *custody.Writer,
	m *ledger.Mapper, version string, met *metrics.Metrics) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	every := func(name string, d time.Duration, job func(context.Context)) {
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
	if cfg.Invoicing.Enabled() {
		sched := &invoiceScheduler{DB: db, Config: cfg, Log: log, Metrics: met.WatchInvoicing(), Now: time.Now}
		every("invoice close "+cfg.Invoicing.Close+" in "+cfg.Invoicing.TZ+" after "+cfg.Invoicing.Grace.String(), closeCheckInterval, sched.check)
	}
	return func() { cancel(); wg.Wait() }, nil
}
