package ledger

import (
	"fmt"
	"time"
)

// Bound is how far a mapped event time may lie from the time the event was
// received (max_future ahead of it, max_past behind it). An event outside
// fails its mapping: the receipt is kept as failed with the reason, and a
// replay after widening the bound applies it. The bound is measured from the
// receipt's received_at, not from the clock, so a replay or a reconcile of an
// old receipt judges it as its first application did.
//
// In YAML it is a duration ("5m", "35d") or "off"; config parses Text and
// fills in Max, with the documented default when Text is empty.
type Bound struct {
	// Text is the value as configured: "" (not set), "off" or a duration.
	Text string
	// Max is the bound; 0 means the event time is not checked ("off", or a
	// Mapping built in code without one).
	Max time.Duration
}

// UnmarshalYAML keeps the configured text for config to parse: the YAML
// library cannot position errors raised inside custom decoders.
func (b *Bound) UnmarshalYAML(unmarshal func(any) error) error {
	var v any
	if err := unmarshal(&v); err != nil {
		return err
	}
	*b = Bound{Text: fmt.Sprint(v)}
	return nil
}

// window holds a mapping's two bounds and the key that names them in the
// configuration (usage[N]), so a failed receipt says which setting refused it.
type window struct {
	future, past time.Duration
	at           string
}

// check refuses an event time outside the window around received. It is
// two comparisons: the write path pays nothing more per event.
func (w window) check(occurred, received time.Time) error {
	if w.future > 0 && occurred.Sub(received) > w.future {
		return fmt.Errorf("occurred_at: %s is %s after the event was received (%s); %s.max_future allows %s: correct the sender, or widen it and replay",
			stamp(occurred), span(occurred.Sub(received)), stamp(received), w.at, span(w.future))
	}
	if w.past > 0 && received.Sub(occurred) > w.past {
		return fmt.Errorf("occurred_at: %s is %s before the event was received (%s); %s.max_past allows %s: correct the sender, or widen it and replay",
			stamp(occurred), span(received.Sub(occurred)), stamp(received), w.at, span(w.past))
	}
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// span writes a duration as the configuration would: whole days from two
// days up ("26697d" reads better than "640728h0m0s"), else Go's form.
func span(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= 2*day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	if d >= 2*day {
		return fmt.Sprintf("%dd%s", d/day, (d % day).Round(time.Second))
	}
	return d.Round(time.Millisecond).String()
}
