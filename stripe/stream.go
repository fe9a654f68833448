package stripe

import (
	"context"
	"fmt"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// pushKey is a customer's meter in a period: the pushes whose running
// totals go on from one another.
type pushKey struct {
	customer, meter string
	period          int64
}

func keyOf(p schema.StripePush) pushKey { return pushKey{p.CustomerID, p.Meter, p.PeriodStart} }

// pushCache keeps, from one batch to the next, where each customer's
// meter stands as the writer's batches committed it, so a usage row of a
// stream meter reads nothing before it joins the open push: that read was
// 8% of serve's CPU with every feature on (BENCHMARKS.md). It holds
// while the database's data version stays as it was (another connection
// committed: a command's writer) and the process made no claim since
// (a claim closes open pushes). Only the writer's goroutine uses it, in
// Begin and Committed; on PostgreSQL nothing is kept.
type pushCache struct {
	version schema.DataVersion
	claims  int64
	// begun is set from a batch's Begin to its Committed: a batch that
	// never committed (an op failed, or the storage) leaves it set, and
	// the next batch reads afresh, so a cache that was ever wrong cannot
	// fail every batch after it.
	begun bool
	// at is the latest push of each key (ID 0: none yet); nil: nothing is
	// known (PostgreSQL, or a batch that did not hold it).
	at map[pushKey]schema.StripePush
}

// maxCachedPushes bounds the cache (a month of 100,000 customers' meters,
// a few tens of MB); past it, it starts again empty.
const maxCachedPushes = 100_000

// Begin implements custody.Pusher: the pushes of one writer batch.
func (s *Sync) Begin(tx *custody.Tx) custody.Pushes {
	sb := &streamBatch{s: s, tx: tx, seen: map[pushKey]*standing{}, claims: tx.Claims()}
	v, ok := tx.DataVersion()
	c := &s.cache
	if ok && c.at != nil && !c.begun && c.version == v && c.claims == sb.claims {
		sb.cached = c.at
	} else {
		c.at = nil
	}
	c.begun = true
	return sb
}

// streamBatch is one batch's pushes (custody.Pushes): the usage rows it
// added to open pushes, or that started one, remembered per key so the
// next row of the key reads nothing. A row that joins an open push is
// stored with the push's next Flush, so a busy customer's rows in one
// batch are one UPDATE: custody flushes before every op other than a
// delivery (one may claim or read pushes) and before the batch commits,
// and the batch flushes itself before a correction reads the database and
// when it sees a claim.
type streamBatch struct {
	s  *Sync
	tx *custody.Tx
	// cached is the cache as earlier batches committed it, nil when it
	// does not hold for this batch (or no longer: a claim in it).
	cached map[pushKey]schema.StripePush
	// seen is where each key this batch wrote or read stands; nil means
	// read it again (a correction wrote it through the database).
	seen   map[pushKey]*standing
	claims int64 // the claims count seen and cached hold for
	// journal undoes seen back to a Mark: each entry restores a key, or,
	// with reset, empties seen (a claim happened in the batch).
	journal []undo
}

type undo struct {
	key   pushKey
	prev  *standing
	had   bool
	reset bool
}

// standing is where a key stands: its latest push (ID 0: none yet), and
// whether that carries rows the database does not have yet (Flush).
// Entries are never changed, only replaced, so the journal's undo of one
// restores both.
type standing struct {
	push  schema.StripePush
	dirty bool
}

// usage writes the push of usage row r: it joins the key's
// latest push while that is an open usage push of the same Stripe customer
// and event (its message never claimed: nothing of it has reached Stripe),
// or starts a new open one. A busy customer's usage between two claims of
// the relay is one push, one meter event, and one row on the writer
// instead of one per ledger row; it commits with the row (invariant 7).
func (sb *streamBatch) usage(ctx context.Context, p schema.StripePush, r *ledger.Row, factor pricing.Decimal) error {
	k := keyOf(p)
	last, err := sb.where(ctx, k)
	if err != nil {
		return err
	}
	q := r.Quantity.Decimal()
	v, err := carry(last, &p, q, factor)
	if err != nil {
		return err
	}
	b := sb.tx.Stripe()
	if !last.Open || last.Source != SourceUsage || last.StripeCustomer != p.StripeCustomer || last.EventName != p.EventName {
		p.Identifier = Identifier(SourceUsage, r.Provider, r.EventID, r.Meter)
		p.Open, p.Rows, p.LastLedgerID = true, 1, p.LedgerID
		if p.ID, err = b.InsertStripePush(ctx, p, config.StripeDestination, sb.tx.Now()); err != nil {
			return err
		}
		sb.set(k, &standing{push: p})
		return nil
	}
	lq, err := pricing.ParseDecimal(last.Quantity)
	if err != nil {
		return fmt.Errorf("the open push's quantity: %w", err)
	}
	lv, err := pricing.ParseDecimal(last.Value)
	if err != nil {
		return fmt.Errorf("the open push's value: %w", err)
	}
	if lq, err = pricing.Add(lq, q); err != nil {
		return err
	}
	if lv, err = pricing.Add(lv, v); err != nil {
		return err
	}
	last.Quantity, last.Value, last.Total, last.Pushed = lq.String(), lv.String(), p.Total, p.Pushed
	last.Timestamp, last.Rows, last.LastLedgerID = max(last.Timestamp, p.Timestamp), last.Rows+1, p.LedgerID
	sb.set(k, &standing{push: last, dirty: true})
	return nil
}

// Flush implements custody.Pushes: it stores what each open push the batch
// added rows to carries now, one UPDATE per push however many rows joined
// it (the trigger of migration 0037 refuses it for a push already claimed).
func (sb *streamBatch) Flush(ctx context.Context) error {
	for k, s := range sb.seen {
		if s == nil || !s.dirty {
			continue
		}
		if err := sb.tx.Stripe().AddToStripePush(ctx, s.push); err != nil {
			return err
		}
		sb.set(k, &standing{push: s.push})
	}
	return nil
}

// where is where k stands: what the batch wrote, else what earlier
// batches committed, else the database's (Batch.LastStripePush). A claim
// since the batch last looked closes open pushes: all it knew goes.
func (sb *streamBatch) where(ctx context.Context, k pushKey) (schema.StripePush, error) {
	if c := sb.tx.Claims(); c != sb.claims {
		// The writer flushed before an op of this batch that claims; a
		// claim another connection of this process counted waits for the
		// batch's lock. Either way the pushes kept back are still open:
		// they are stored before the batch forgets them.
		if err := sb.Flush(ctx); err != nil {
			return schema.StripePush{}, err
		}
		sb.claims, sb.cached = c, nil
		clear(sb.seen)
		sb.journal = append(sb.journal, undo{reset: true})
	}
	if s := sb.seen[k]; s != nil {
		return s.push, nil
	}
	if last, ok := sb.cached[k]; ok {
		return last, nil
	}
	return sb.tx.Stripe().LastStripePush(ctx, k.customer, k.meter, k.period)
}

// set records where k stands after the batch wrote it (nil: read it again).
func (sb *streamBatch) set(k pushKey, last *standing) {
	prev, had := sb.seen[k]
	sb.journal = append(sb.journal, undo{key: k, prev: prev, had: had})
	sb.seen[k] = last
}

// forget makes the next row of k read where it stands: a correction
// writes its push through the database.
func (sb *streamBatch) forget(k pushKey) { sb.set(k, nil) }

// Mark implements custody.Pushes.
func (sb *streamBatch) Mark() int { return len(sb.journal) }

// Undo implements custody.Pushes: the savepoint undid the op's pushes, so
// what the batch knew goes back to the mark. Past a claim's reset, nothing
// of before it is known again: the batch reads afresh.
func (sb *streamBatch) Undo(mark int) {
	for i := len(sb.journal) - 1; i >= mark; i-- {
		u := sb.journal[i]
		switch {
		case u.reset:
			clear(sb.seen)
		case u.had:
			sb.seen[u.key] = u.prev
		default:
			delete(sb.seen, u.key)
		}
	}
	sb.journal = sb.journal[:mark]
}

// Committed implements custody.Pushes: what the batch wrote is what the
// database holds, for the next batches. A claim after the batch last
// looked, or a cache past its bound, leaves it empty.
func (sb *streamBatch) Committed() {
	c := &sb.s.cache
	c.begun = false
	v, ok := sb.tx.DataVersion()
	if !ok {
		return
	}
	now := sb.tx.Claims()
	if sb.cached == nil || now != sb.claims || len(sb.cached)+len(sb.seen) > maxCachedPushes {
		c.at = map[pushKey]schema.StripePush{}
	} else {
		c.at = sb.cached
	}
	if now == sb.claims {
		for k, last := range sb.seen {
			if last == nil {
				delete(c.at, k)
				continue
			}
			c.at[k] = last.push
		}
	}
	c.version, c.claims = v, now
}
