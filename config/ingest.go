package config

import (
	"strings"
	"time"

	"github.com/hookledger/hookledger/ledger"
)

// Ingest bounds the first-party ingest API (POST /v1/events, docs/ingest.md).
type Ingest struct {
	// MaxEvents is the most events one request may carry; more is 413 and
	// nothing is written. Default 1000.
	MaxEvents int `yaml:"max_events"`
	// MaxBody is the largest request body in bytes; larger is 413. Default
	// 1 MiB; at most limits.body_budget.
	MaxBody int64 `yaml:"max_body"`
	// KeyCache is how long serve trusts what it read about an API key: a
	// revoked key stops working within it. Default 1s; at most 1m.
	KeyCache Duration `yaml:"key_cache"`
}

// Ingest defaults.
const (
	DefaultIngestMaxEvents = 1000
	DefaultIngestMaxBody   = 1 << 20
	DefaultKeyCache        = time.Second
)

// APIScopePrefix starts the provider of the ingest API's events ("api:" and
// the API key's name). A usage mapping may select on it like on a provider;
// keys are created at run time, so the name is not checked against them.
const APIScopePrefix = ledger.APIScopePrefix

// isAPIScope reports whether a mapping's provider names an API key's scope.
func isAPIScope(p string) bool {
	name, ok := strings.CutPrefix(p, APIScopePrefix)
	return ok && providerName.MatchString(name)
}

func (c *Config) resolveIngest() error {
	in := &c.Ingest
	switch {
	case in.MaxEvents < 0:
		return errAt("ingest.max_events", "must be positive")
	case in.MaxEvents == 0:
		in.MaxEvents = DefaultIngestMaxEvents
	}
	switch {
	case in.MaxBody < 0:
		return errAt("ingest.max_body", "must be positive (bytes)")
	case in.MaxBody == 0:
		in.MaxBody = DefaultIngestMaxBody
	}
	if in.MaxBody > c.Limits.BodyBudget {
		return errAt("ingest.max_body", "%d bytes is more than limits.body_budget (%d): a request that large could never be read",
			in.MaxBody, c.Limits.BodyBudget)
	}
	if err := in.KeyCache.Check(); err != nil {
		return errAt("ingest.key_cache", "%v", err)
	}
	switch d := in.KeyCache.Duration; {
	case d == 0:
		in.KeyCache.Duration = DefaultKeyCache
	case d > time.Minute:
		return errAt("ingest.key_cache", "%s is longer than 1m: a revoked key would keep working that long", d)
	}
	return nil
}
