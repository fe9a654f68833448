package forward

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/schema"
)

// lease is how long a claim keeps its messages from other relays' claims:
// one attempt (the timeout), the write that records it, and a margin for a
// busy writer. A batch may take much longer (rounds of Concurrency, a rate
// limit): the relay renews the lease while it works (hold), so the lease
// only has to outlast the gap between renewals. A relay that died holding
// messages lets them go one lease after its last renewal — 25 s with the
// default 10 s timeout — instead of after a whole batch's worth of
// timeouts (335 s for 256 messages, 8 at a time), which is how long the
// other receivers' relays (PostgreSQL) used to wait for them.
func (d *destination) lease() time.Duration {
	return 2*d.cfg.Timeout.Duration + 5*time.Second
}

// claim claims up to limit due messages, or with probe the message due
// first as the destination's probe, and returns them with the end of their
// lease (unix ms).
func (d *destination) claim(ctx context.Context, now time.Time, limit int, probe bool) ([]schema.OutboxClaim, int64, error) {
	var claims []schema.OutboxClaim
	lease := now.Add(d.lease()).UnixMilli()
	err := d.relay.Writer.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		var err error
		if probe {
			claims, err = tx.Outbox().ClaimProbe(ctx, d.cfg.Name, now.UnixMilli(), lease)
		} else {
			claims, err = tx.Outbox().ClaimOutbox(ctx, d.cfg.Name, now.UnixMilli(), lease, limit)
		}
		return err
	}))
	if err != nil {
		return nil, 0, fmt.Errorf("claim: %w", err)
	}
	return claims, lease, nil
}

// hold renews the lease of claims (ending at until) every third of a lease
// until stop is called, so a batch that takes longer than one lease keeps
// its messages while a relay that died lets them go soon. A renewal that
// fails is tried again at the next look; the lease it missed may run out,
// and another relay then attempts the messages too: at least once, never
// lost. The clock is the relay's (Now), looked at every Poll.
func (d *destination) hold(ctx context.Context, claims []schema.OutboxClaim, until int64) (stop func()) {
	r := d.relay
	ids := make([]int64, len(claims))
	for i, c := range claims {
		ids[i] = c.ID
	}
	every := d.lease() / 3
	renewed := r.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(r.Poll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := r.Now()
			if now.Sub(renewed) < every {
				continue
			}
			next := now.Add(d.lease()).UnixMilli()
			err := r.Writer.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
				_, err := tx.Outbox().RenewClaims(ctx, ids, until, next)
				return err
			}))
			if err != nil {
				r.Log.Warn("forward", "destination", d.cfg.Name, "error", "renew the lease: "+err.Error())
				continue
			}
			until, renewed = next, now
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
