package forward

import (
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/hookledger/hookledger/config"
)

// maxProbeInterval is the longest a failing destination waits between two
// probes (Retry-After aside): the destination's backoff grows like a
// message's (1 s, 2 s, 4 s … ±50%) but stops here, so delivery resumes
// within about a minute of the application's recovery however long it was
// down, while a destination that is down still gets one request a minute.
const maxProbeInterval = time.Minute

// probeDelay is how long a destination that failed n probes in a row waits
// before the next.
func probeDelay(c config.Destination, n int) time.Duration {
	return min(delay(c, n), maxProbeInterval)
}

// delay is the backoff before retry n (1: after the first failure):
// exponential from backoff to max_backoff, with ±50% jitter so the messages
// and destinations that failed together do not retry together.
func delay(c config.Destination, n int) time.Duration {
	b := &backoff.ExponentialBackOff{InitialInterval: c.Backoff.Duration, RandomizationFactor: 0.5, Multiplier: 2,
		MaxInterval: c.MaxBackoff.Duration}
	b.Reset()
	d := b.NextBackOff()
	for i := 1; i < n && i < 64; i++ {
		d = b.NextBackOff()
	}
	return d
}
