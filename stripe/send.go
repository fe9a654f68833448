package stripe

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// A Send is one request to Stripe: a meter event carrying one push, or the
// sum of the pushes of one customer, meter and period the relay found
// pending together, or the cancel of a push's meter event.
type Send struct {
	schema.StripeSend
	// Pushes are the claimed pushes it carries, in push order; all of them
	// when New, some when it is being sent again after a restart (the
	// others were claimed apart, and their send is a duplicate then).
	Pushes []schema.StripePush
	// New means it was made now: it must be stored before its request.
	New bool
	// Restamp means it was stored with a time Stripe's window has passed
	// since: it is sent, and stored, with the time of this attempt.
	Restamp bool
}

// Cancel reports whether s is a void's cancel of an earlier push (a meter
// event adjustment) rather than a meter event.
func (s Send) Cancel() bool { return s.Pushes[0].Cancels != "" }

// IDs are the ids of the pushes s carries.
func (s Send) IDs() []int64 {
	ids := make([]int64, len(s.Pushes))
	for i, p := range s.Pushes {
		ids[i] = p.ID
	}
	return ids
}

// Plan turns the claimed pushes into sends, per customer and meter in the
// order they must reach Stripe (Stripe takes one call at a time per pair).
//
// A push already sent (its send stored) is sent again as stored, with the
// pushes of its send claimed with it. Of the others, each run of pushes of
// one pair up to a cancel becomes one send per period (the running
// remainder is kept per period, so a sum never mixes two), under its one
// push's identifier when it carries one, or under an identifier derived
// from exactly the pushes it covers. A cancel is sent alone.
//
// A send's time is the latest of its pushes' own; when that is outside
// Stripe's window at now (more than 35 days old, or more than 5 minutes
// ahead), the send is carried: stamped now, so Stripe counts it in its
// current period rather than refusing it.
func Plan(pushes []schema.StripePush, now time.Time) ([][]Send, error) {
	type pair struct{ customer, meter string }
	var order []pair
	byPair := map[pair][]schema.StripePush{}
	for _, p := range pushes {
		k := pair{p.CustomerID, p.Meter}
		if _, ok := byPair[k]; !ok {
			order = append(order, k)
		}
		byPair[k] = append(byPair[k], p)
	}
	out := make([][]Send, 0, len(order))
	for _, k := range order {
		ps := byPair[k]
		slices.SortFunc(ps, func(a, b schema.StripePush) int { return cmp.Compare(a.ID, b.ID) })
		var sends []Send
		stored := map[string]int{} // send identifier → index in sends
		var run []schema.StripePush
		flush := func() error {
			for _, group := range byPeriod(run) {
				s, err := newSend(group, now)
				if err != nil {
					return err
				}
				sends = append(sends, s)
			}
			run = nil
			return nil
		}
		for _, p := range ps {
			switch {
			case p.Send.Identifier != "":
				if i, ok := stored[p.Send.Identifier]; ok {
					sends[i].Pushes = append(sends[i].Pushes, p)
					continue
				}
				s := Send{StripeSend: p.Send, Pushes: []schema.StripePush{p}}
				if CheckWindow(s.Timestamp, now) != nil {
					s.Timestamp, s.Carried, s.Restamp = now.Unix(), 1, true
				}
				stored[p.Send.Identifier] = len(sends)
				sends = append(sends, s)
			case p.Cancels != "":
				if err := flush(); err != nil {
					return nil, err
				}
				s, err := newSend([]schema.StripePush{p}, now)
				if err != nil {
					return nil, err
				}
				sends = append(sends, s)
			default:
				run = append(run, p)
			}
		}
		if err := flush(); err != nil {
			return nil, err
		}
		out = append(out, sends)
	}
	return out, nil
}

// byPeriod splits pushes of one pair into groups of one period, Stripe
// customer and event name, in the order each first appears.
func byPeriod(pushes []schema.StripePush) [][]schema.StripePush {
	type key struct {
		period          int64
		customer, event string
	}
	var order []key
	groups := map[key][]schema.StripePush{}
	for _, p := range pushes {
		k := key{p.PeriodStart, p.StripeCustomer, p.EventName}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	out := make([][]schema.StripePush, len(order))
	for i, k := range order {
		out[i] = groups[k]
	}
	return out
}

// newSend is the send of pushes, not stored yet. A push of one row sent
// alone goes under its own identifier (a void's cancel names it). Any other
// send's identifier is derived from exactly what it carries: each push's
// identifier, rows and quantity. A stream push's identifier comes from its
// first row, and a push that a restore from the replica left open may take
// rows it did not have when Stripe took it. Sent again under its own
// identifier, Stripe would answer that it has it, and those rows would
// never reach Stripe.
func newSend(pushes []schema.StripePush, now time.Time) (Send, error) {
	s := Send{StripeSend: schema.StripeSend{Count: len(pushes)}, Pushes: pushes, New: true}
	sum := pricing.NewDecimal(0, 0)
	ids := make([]string, 0, len(pushes)+1)
	ids = append(ids, "sum")
	for _, p := range pushes {
		v, err := pricing.ParseDecimal(p.Value)
		if err != nil {
			return Send{}, fmt.Errorf("push %s: value %q: %w", p.Identifier, p.Value, err)
		}
		if sum, err = pricing.Add(sum, v); err != nil {
			return Send{}, err
		}
		s.Timestamp = max(s.Timestamp, p.Timestamp)
		ids = append(ids, p.Identifier, strconv.FormatInt(p.Rows, 10), p.Quantity)
	}
	s.Value = sum.String()
	s.Identifier = pushes[0].Identifier
	if len(pushes) > 1 || pushes[0].Rows > 1 {
		s.Identifier = Identifier(ids...)
	}
	if CheckWindow(s.Timestamp, now) != nil {
		s.Timestamp, s.Carried = now.Unix(), 1
	}
	return s, nil
}
