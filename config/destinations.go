package config

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"time"

	"github.com/hookledger/hookledger/scheme"
)

// Destination defaults.
const (
	DefaultForwardTimeout     = 10 * time.Second
	DefaultForwardMaxAttempts = 15
	DefaultForwardMaxAge      = 72 * time.Hour
	DefaultForwardBackoff     = time.Second
	DefaultForwardMaxBackoff  = time.Hour
	DefaultForwardConcurrency = 8
	// DefaultForwardMaxConcurrency is the ceiling of a destination's
	// adaptive concurrency: 128 requests in flight deliver 1,000 messages/s
	// to an application answering in up to 128 ms (in flight = rate ×
	// latency); 64 would fall short of 1,000/s at 65 ms.
	DefaultForwardMaxConcurrency = 128
)

// Destination is an application hookledger forwards accepted events to
// (see docs/forwarding.md): each matching receipt gets an outbox row in its
// custody transaction, and serve's relay POSTs the raw body, signed the
// Standard Webhooks way, until it gets a 2xx or gives up (status dead).
type Destination struct {
	// Name identifies the destination in the outbox, the CLI and metrics.
	Name string `yaml:"name"`
	// URL receives POST requests (http or https).
	URL string `yaml:"url"`
	// Events selects what is forwarded; the zero value forwards everything.
	Events Events `yaml:"events"`
	// Secrets sign each request (Standard Webhooks whsec_…); several during
	// a rotation, each one signature in webhook-signature.
	Secrets []Secret `yaml:"secrets"`
	// Timeout bounds one attempt, connection to last body byte. Default 10s.
	Timeout Duration `yaml:"timeout"`
	// MaxAttempts and MaxAge end retrying: a message that failed its
	// MaxAttempts-th attempt, or failed an attempt MaxAge after it became
	// pending, is dead (kept until `forward retry`). Defaults 15 and 72h.
	MaxAttempts int      `yaml:"max_attempts"`
	MaxAge      Duration `yaml:"max_age"`
	// Backoff is the first retry delay, doubled (with jitter) per failure
	// up to MaxBackoff. Defaults 1s and 1h. A Retry-After is honoured.
	Backoff    Duration `yaml:"backoff"`
	MaxBackoff Duration `yaml:"max_backoff"`
	// Concurrency is how many requests may be in flight to this destination
	// at least: the relay raises the limit while messages wait and the
	// answers are healthy, up to MaxConcurrency, and lowers it on errors,
	// timeouts and 429, never below Concurrency (docs/forwarding.md).
	// Defaults 8 and 128 (or Concurrency, when that is higher); MaxConcurrency
	// equal to Concurrency is a fixed limit.
	Concurrency    int `yaml:"concurrency"`
	MaxConcurrency int `yaml:"max_concurrency"`
	// RateLimit, when set, caps requests per second (burst: how many may go
	// at once after a pause; default 1).
	RateLimit *RateLimit `yaml:"rate_limit"`
}

// Events selects receipts by provider and event type; empty lists match all.
// Types are patterns as in path.Match: "invoice.*" matches "invoice.paid".
type Events struct {
	Providers []string `yaml:"providers"`
	Types     []string `yaml:"types"`
}

// RateLimit is a token bucket: PerSecond requests per second, Burst at once.
type RateLimit struct {
	PerSecond float64 `yaml:"per_second"`
	Burst     int     `yaml:"burst"`
}

// Matches reports whether an event of provider with eventType is forwarded
// to d.
func (d *Destination) Matches(provider, eventType string) bool {
	if len(d.Events.Providers) > 0 {
		found := false
		for _, p := range d.Events.Providers {
			if p == provider {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if len(d.Events.Types) == 0 {
		return true
	}
	for _, pat := range d.Events.Types {
		if ok, _ := path.Match(pat, eventType); ok {
			return true
		}
	}
	return false
}

var destinationName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// resolveDestinations validates destinations:, after the providers.
func (c *Config) resolveDestinations(dir string) error {
	providers := map[string]bool{}
	for _, p := range c.Providers {
		providers[p.Name] = true
	}
	standard, err := scheme.New("standard", scheme.HMACOptions{})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range c.Destinations {
		d := &c.Destinations[i]
		at := fmt.Sprintf("destinations[%d]", i)
		if !destinationName.MatchString(d.Name) {
			return errAt(at+".name", "%q must be lowercase letters, digits, - or _", d.Name)
		}
		if seen[d.Name] {
			return errAt(at+".name", "destination %q is defined twice", d.Name)
		}
		seen[d.Name] = true
		u, err := url.Parse(d.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errAt(at+".url", "%q is not an http or https URL", d.URL)
		}
		for j, p := range d.Events.Providers {
			// an ingest API key's events: api:NAME; hookledger's own (alerts): hookledger
			if !providers[p] && !isAPIScope(p) && p != AlertProvider {
				return errAt(fmt.Sprintf("%s.events.providers[%d]", at, j), "no provider named %q", p)
			}
		}
		for j, pat := range d.Events.Types {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				return errAt(fmt.Sprintf("%s.events.types[%d]", at, j), "%q is not a pattern (use e.g. invoice.* or payment_intent.succeeded)", pat)
			}
		}
		if len(d.Secrets) == 0 {
			return errAt(at+".secrets", "at least one secret is required (a Standard Webhooks whsec_… secret the application verifies with)")
		}
		resolved := d.Secrets[:0:0]
		for j := range d.Secrets {
			sec := &d.Secrets[j]
			sat := fmt.Sprintf("%s.secrets[%d]", at, j)
			if err := sec.read(dir, sat); c.leaveOut(err) {
				continue
			} else if err != nil {
				return err
			}
			if _, err := standard.Key(sec.Value); err != nil {
				return errAt(sat, "not a valid Standard Webhooks secret: %v", err)
			}
			resolved = append(resolved, *sec)
		}
		d.Secrets = resolved
		if err := d.delivery(at); err != nil {
			return err
		}
	}
	return nil
}

// delivery checks the outbox knobs (timeout, attempts, backoff,
// concurrency, rate limit) and fills their defaults; at is the key's path.
func (d *Destination) delivery(at string) error {
	for _, f := range []struct {
		key string
		d   *Duration
		def time.Duration
	}{{"timeout", &d.Timeout, DefaultForwardTimeout}, {"max_age", &d.MaxAge, DefaultForwardMaxAge},
		{"backoff", &d.Backoff, DefaultForwardBackoff}, {"max_backoff", &d.MaxBackoff, DefaultForwardMaxBackoff}} {
		if err := f.d.Check(); err != nil {
			return errAt(at+"."+f.key, "%v", err)
		}
		if f.d.Duration == 0 {
			f.d.Duration = f.def
		}
	}
	if d.MaxBackoff.Duration < d.Backoff.Duration {
		return errAt(at+".max_backoff", "%s is shorter than backoff (%s)", d.MaxBackoff.Duration, d.Backoff.Duration)
	}
	switch {
	case d.MaxAttempts < 0:
		return errAt(at+".max_attempts", "must be positive")
	case d.MaxAttempts == 0:
		d.MaxAttempts = DefaultForwardMaxAttempts
	}
	switch {
	case d.Concurrency < 0:
		return errAt(at+".concurrency", "must be positive")
	case d.Concurrency == 0:
		d.Concurrency = DefaultForwardConcurrency
	}
	switch {
	case d.MaxConcurrency < 0:
		return errAt(at+".max_concurrency", "must be positive")
	case d.MaxConcurrency == 0:
		d.MaxConcurrency = max(DefaultForwardMaxConcurrency, d.Concurrency)
	case d.MaxConcurrency < d.Concurrency:
		return errAt(at+".max_concurrency", "%d is below concurrency (%d), the floor the relay starts from", d.MaxConcurrency, d.Concurrency)
	}
	if r := d.RateLimit; r != nil {
		if r.PerSecond <= 0 {
			return errAt(at+".rate_limit.per_second", "must be positive")
		}
		switch {
		case r.Burst < 0:
			return errAt(at+".rate_limit.burst", "must be positive")
		case r.Burst == 0:
			r.Burst = 1
		}
	}
	return nil
}
