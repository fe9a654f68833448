package bench

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// IDs is how a run's event ids are made.
type IDs int

const (
	// Sequential ids (bench-RUN-00000042) form one contiguous range of the
	// (provider, event_id) index: every insert lands at its right edge.
	Sequential IDs = iota
	// Random ids look like Stripe's (evt_ and 24 base62 characters, e.g.
	// evt_1Ip9ANH1Vac4G4dbE9ch7zGS): every insert lands at a random place of
	// the index, among every id stored before. Stripe's own ids start with a
	// time-ordered prefix; fully random ones are the harder case.
	Random
)

// ParseIDs reads "sequential" or "random".
func ParseIDs(s string) (IDs, error) {
	switch s {
	case "sequential":
		return Sequential, nil
	case "random":
		return Random, nil
	}
	return 0, fmt.Errorf("ids: %q is not one of sequential, random", s)
}

func (k IDs) String() string {
	if k == Random {
		return "random"
	}
	return "sequential"
}

// EventID is the id of event i of the run runID.
func (k IDs) EventID(runID string, i int) string {
	if k == Random {
		return RandomEventID(runID, i)
	}
	return EventID(runID, i)
}

// base62 is the alphabet of Stripe's ids.
const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// RandomEventID is a Stripe-like id (evt_ and 24 base62 characters) that is
// a pure function of the run and the index, so a verify, a second plan with
// the same --run-id, or a prefill knows every id without storing it: the
// characters come from SHA-256(runID, i), a byte mapped to one of 62 only
// when below 248 (4×62) so that every character is equally likely. 24
// characters hold 142 bits: two ids of 10 million collide with a
// probability below 10^-28.
func RandomEventID(runID string, i int) string {
	const n = 24
	out := make([]byte, 4, 4+n)
	copy(out, "evt_")
	var in []byte
	for block := uint32(0); len(out) < 4+n; block++ {
		in = binary.BigEndian.AppendUint64(append(in[:0], runID...), uint64(i))
		in = binary.BigEndian.AppendUint32(in, block)
		sum := sha256.Sum256(in)
		for _, b := range sum {
			if b < 248 && len(out) < 4+n {
				out = append(out, base62[b%62])
			}
		}
	}
	return string(out)
}
