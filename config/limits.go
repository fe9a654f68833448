package config

import "time"

// Limits bound what senders can make the webhook listener hold, so a flood
// of slow or stalled (and unauthenticated) connections cannot grow serve's
// memory without bound. Worst case, request bodies hold about
// max_connections × 16 KiB (each body's first 16 KiB is outside the budget)
// plus body_budget.
type Limits struct {
	// MaxConnections caps the webhook listener's open connections (health
	// checks included); further connections wait in the kernel's accept
	// queue until one closes, and at the cap the longest-idle keep-alive
	// connection is closed to make room. Default 4096.
	MaxConnections int `yaml:"max_connections"`
	// BodyBudget is how many body bytes all requests may hold at once
	// beyond each body's first 16 KiB. It is charged as the bytes arrive,
	// not by Content-Length: a body's buffer grows as it fills (to at most
	// about twice what has arrived), and each growth takes its share first.
	// A request that cannot get more within a second gets 503 with
	// Retry-After. Default 32 MiB; at least every max_body.
	BodyBudget int64 `yaml:"body_budget"`
	// BodyTimeout is how long a request may take to deliver its body
	// (waiting for the budget included), after its headers. Default 10s.
	BodyTimeout Duration `yaml:"body_timeout"`
}

// Limit defaults.
const (
	DefaultMaxConnections = 4096
	DefaultBodyBudget     = 32 << 20
	DefaultBodyTimeout    = 10 * time.Second
)

func (c *Config) resolveLimits() error {
	l := &c.Limits
	switch {
	case l.MaxConnections < 0:
		return errAt("limits.max_connections", "must be positive")
	case l.MaxConnections == 0:
		l.MaxConnections = DefaultMaxConnections
	}
	switch {
	case l.BodyBudget < 0:
		return errAt("limits.body_budget", "must be positive (bytes)")
	case l.BodyBudget == 0:
		l.BodyBudget = DefaultBodyBudget
	}
	for i, p := range c.Providers {
		if p.MaxBody > l.BodyBudget {
			return errAt("limits.body_budget", "%d bytes is less than providers[%d].max_body (%d): a delivery that large could never be read",
				l.BodyBudget, i, p.MaxBody)
		}
	}
	if err := l.BodyTimeout.Check(); err != nil {
		return errAt("limits.body_timeout", "%v", err)
	}
	if l.BodyTimeout.Duration == 0 {
		l.BodyTimeout.Duration = DefaultBodyTimeout
	}
	return nil
}
