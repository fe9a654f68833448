package ingest

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hookledger/hookledger/schema"
)

// KeyStore is what the keyring reads (*schema.DB).
type KeyStore interface {
	APIKeyBySHA256(ctx context.Context, sum []byte) (schema.APIKey, error)
}

// DefaultKeyTTL is how long serve trusts what it read about a key. Keys are
// created and revoked by `hookledger keys`, another process, so serve learns
// about them from the database: a new key works at once (an unknown key is
// always looked up), a revoked one stops working within DefaultKeyTTL.
// A lookup is one probe of a unique index on the read pool: 87 µs on the
// benchmark machine while it was shared (schema's BenchmarkAPIKeyLookup),
// about half of what a whole webhook request costs serve, so without the
// cache a busy key would pay it on every request; with it, once a second.
const DefaultKeyTTL = time.Second

// Keyring authenticates API keys against the database and holds each key's
// rate limiter.
type Keyring struct {
	Store KeyStore
	// TTL is how long a key read from the database is trusted. Default
	// DefaultKeyTTL; negative: no cache.
	TTL time.Duration
	// Now is the clock of the cache and the rate limits. Default time.Now.
	Now func() time.Time

	mu       sync.Mutex
	cache    map[[32]byte]cachedKey // only keys found in the database: unknown keys are never cached
	limiters map[int64]*rate.Limiter
}

type cachedKey struct {
	key  schema.APIKey
	read time.Time
}

// NewKeyring returns a keyring reading store.
func NewKeyring(store KeyStore) *Keyring {
	return &Keyring{Store: store, TTL: DefaultKeyTTL, Now: time.Now}
}

// Authenticate returns the valid key whose plaintext is key. A storage error
// is returned as it is (503 at the API): a key that cannot be checked is not
// refused as if it were wrong.
func (k *Keyring) Authenticate(ctx context.Context, key string) (schema.APIKey, error) {
	sum := sha256.Sum256([]byte(key))
	now := k.Now()
	k.mu.Lock()
	c, ok := k.cache[sum]
	k.mu.Unlock()
	if !ok || k.TTL < 0 || now.Sub(c.read) >= k.TTL {
		stored, err := k.Store.APIKeyBySHA256(ctx, sum[:])
		if errors.Is(err, schema.ErrNotFound) {
			return schema.APIKey{}, ErrUnknownKey
		}
		if err != nil {
			return schema.APIKey{}, err
		}
		c = cachedKey{key: stored, read: now}
		k.mu.Lock()
		if k.cache == nil {
			k.cache = map[[32]byte]cachedKey{}
		}
		k.cache[sum] = c
		k.mu.Unlock()
	}
	// The lookup found the row by its hash; comparing the hashes again in
	// constant time keeps the decision itself free of timing differences.
	if subtle.ConstantTimeCompare(c.key.SHA256, sum[:]) != 1 {
		return schema.APIKey{}, ErrUnknownKey
	}
	if c.key.RevokedAt != nil {
		return schema.APIKey{}, ErrRevokedKey
	}
	return c.key, nil
}

// Allow takes one request from key's rate limit. When it is spent, ok is
// false and retryAfter says when the next request would be allowed.
func (k *Keyring) Allow(key schema.APIKey) (ok bool, retryAfter time.Duration) {
	if key.RateLimit <= 0 {
		return true, 0
	}
	now := k.Now()
	k.mu.Lock()
	lim := k.limiters[key.ID]
	if lim == nil {
		if k.limiters == nil {
			k.limiters = map[int64]*rate.Limiter{}
		}
		lim = rate.NewLimiter(rate.Limit(key.RateLimit), Burst(key))
		k.limiters[key.ID] = lim
	}
	k.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Burst is the key's burst: as configured, else its rate rounded up (at least 1).
func Burst(key schema.APIKey) int {
	if key.Burst > 0 {
		return key.Burst
	}
	return max(1, int(math.Ceil(key.RateLimit)))
}
