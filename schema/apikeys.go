package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// versionAPIKeys is the migration that created api_keys.
const versionAPIKeys = 8

// APIKey is a stored API key of the ingest API: its hash, never the key.
type APIKey struct {
	ID        int64   `db:"id"`
	Name      string  `db:"name"`
	Prefix    string  `db:"prefix"`
	SHA256    []byte  `db:"key_sha256"`
	RateLimit float64 `db:"rate_limit"` // requests per second; 0: no limit
	Burst     int     `db:"burst"`
	CreatedAt int64   `db:"created_at"`
	// RevokedAt is nil while the key is valid.
	RevokedAt *int64 `db:"revoked_at"`
}

// ErrRevoked means the key was already revoked.
var ErrRevoked = errors.New("already revoked")

// InsertAPIKey stores k and returns it with its id. It runs outside the
// writer (a CLI command): api_keys is no part of the custody chain, and
// the write lock with the busy timeout lets it take turns with serve.
func (db *DB) InsertAPIKey(ctx context.Context, k APIKey) (APIKey, error) {
	err := db.Write.QueryRowContext(ctx, `INSERT INTO api_keys (name, prefix, key_sha256, rate_limit, burst, created_at)
		VALUES (?, ?, ?, ?, ?, ?) RETURNING id`, k.Name, k.Prefix, k.SHA256, k.RateLimit, k.Burst, k.CreatedAt).Scan(&k.ID)
	if err != nil {
		return APIKey{}, fmt.Errorf("insert API key: %w", err)
	}
	return k, nil
}

// RevokeAPIKey marks key id revoked at the given time and returns it
// (ErrNotFound: no such key; ErrRevoked: it was revoked before, and keeps
// its first revocation time).
func (db *DB) RevokeAPIKey(ctx context.Context, id, at int64) (APIKey, error) {
	var k APIKey
	err := db.Write.QueryRowxContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL
		RETURNING id, name, prefix, key_sha256, rate_limit, burst, created_at, revoked_at`, at, id).StructScan(&k)
	if errors.Is(err, sql.ErrNoRows) {
		var revoked bool
		switch err := db.Write.QueryRowContext(ctx, `SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = ?`, id).Scan(&revoked); {
		case errors.Is(err, sql.ErrNoRows):
			return APIKey{}, ErrNotFound
		case err != nil:
			return APIKey{}, fmt.Errorf("revoke API key %d: %w", id, err)
		}
		return APIKey{}, ErrRevoked
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("revoke API key %d: %w", id, err)
	}
	return k, nil
}

// APIKeys lists every key, revoked ones too, by id. A database older than
// the ingest API has none.
func (db *DB) APIKeys(ctx context.Context) ([]APIKey, error) {
	var ks []APIKey
	err := db.Read.SelectContext(ctx, &ks, `SELECT id, name, prefix, key_sha256, rate_limit, burst, created_at, revoked_at
		FROM api_keys ORDER BY id`)
	if err != nil && predates(ctx, db.Read, versionAPIKeys) {
		return nil, nil
	}
	return ks, err
}

// APIKeyBySHA256 is the key whose SHA-256 is sum, revoked or not
// (ErrNotFound: none). One probe of the unique index, on the read pool.
func (db *DB) APIKeyBySHA256(ctx context.Context, sum []byte) (APIKey, error) {
	var k APIKey
	err := db.Read.QueryRowxContext(ctx, `SELECT id, name, prefix, key_sha256, rate_limit, burst, created_at, revoked_at
		FROM api_keys WHERE key_sha256 = ?`, sum).StructScan(&k)
	return k, notFound(err)
}
