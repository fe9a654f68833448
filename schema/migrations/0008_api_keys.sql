-- The first-party ingest API (POST /v1/events): API keys, and receipts whose
-- source is 'api'.
--
-- api_keys holds only each key's SHA-256, never the key: keys are 32 random
-- bytes, so a fast hash is as good as a slow one against guessing, and a
-- lookup by hash costs one index probe. revoked_at is set once, never
-- cleared; a revoked key keeps its row so `keys list` and disputes can name it.
--
-- receipts is rebuilt (SQLite cannot change a CHECK constraint in place) so
-- its source check admits 'api'. The rows, their ids and hash-chain links,
-- every other column, the index and the custody-facts trigger are unchanged;
-- it follows the same table-rebuild procedure as 0004 (the migration runner
-- turns foreign keys off around the transaction and runs foreign_key_check
-- before it commits), and copies the table once.

CREATE TABLE api_keys (
    id         INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,            -- the scope: its events are stored under provider 'api:' || name
    prefix     TEXT    NOT NULL,            -- the key's first characters, so a person can tell keys apart
    key_sha256 BLOB    NOT NULL UNIQUE,
    rate_limit REAL    NOT NULL DEFAULT 0,  -- requests per second; 0: no limit
    burst      INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER                      -- NULL while the key is valid
);

CREATE TRIGGER api_keys_no_delete BEFORE DELETE ON api_keys
BEGIN
    SELECT RAISE(ABORT, 'API keys are revoked, never deleted');
END;

CREATE TRIGGER api_keys_revoke_only BEFORE UPDATE ON api_keys
WHEN NEW.id != OLD.id OR NEW.name != OLD.name OR NEW.prefix != OLD.prefix OR NEW.key_sha256 != OLD.key_sha256
  OR NEW.rate_limit != OLD.rate_limit OR NEW.burst != OLD.burst OR NEW.created_at != OLD.created_at
  OR OLD.revoked_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'an API key only changes by being revoked, once');
END;

CREATE TABLE receipts_new (
    id                INTEGER PRIMARY KEY,
    provider          TEXT    NOT NULL,
    event_id          TEXT    NOT NULL,
    event_type        TEXT    NOT NULL DEFAULT '',
    body              BLOB,             -- NULL once pruned by retention; body_sha256 stays
    body_sha256       BLOB    NOT NULL,
    signature_headers TEXT    NOT NULL DEFAULT '',
    status            TEXT    NOT NULL CHECK (status = 'applied' OR status = 'ignored' OR status = 'failed'),
    error             TEXT    NOT NULL DEFAULT '',
    handler_version   TEXT    NOT NULL,
    source            TEXT    NOT NULL CHECK (source = 'webhook' OR source = 'reconcile' OR source = 'replay' OR source = 'api'),
    received_at       INTEGER NOT NULL,
    processed_at      INTEGER NOT NULL,
    prev_hash         BLOB    NOT NULL DEFAULT x'',
    row_hash          BLOB    NOT NULL DEFAULT x'',
    UNIQUE (provider, event_id)
);
INSERT INTO receipts_new (id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
                          handler_version, source, received_at, processed_at, prev_hash, row_hash)
    SELECT id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
           handler_version, source, received_at, processed_at, prev_hash, row_hash
    FROM receipts;
DROP TABLE receipts;
ALTER TABLE receipts_new RENAME TO receipts;
CREATE INDEX receipts_status ON receipts (status, received_at);

CREATE TRIGGER receipts_custody_facts_no_update
BEFORE UPDATE OF id, provider, event_id, event_type, body_sha256, source, received_at, prev_hash, row_hash ON receipts
BEGIN
    SELECT RAISE(ABORT, 'a receipt''s custody facts never change');
END;
