-- Rebuild receipts and delivery_attempts with their CHECK constraints written
-- as equalities. SQLite evaluates `x IN ('a', 'b', 'c')` (three or more
-- values) by building a temporary b-tree of the values on every execution of
-- an INSERT: two per receipt and one per attempt, on the writer's hot path.
-- `x = 'a' OR x = 'b' OR x = 'c'` accepts exactly the same values without it.
--
-- The rows, their ids, the other columns, the indexes and the foreign keys
-- (attempts and replays -> receipts) are unchanged. This follows SQLite's
-- documented table-rebuild procedure (https://sqlite.org/lang_altertable.html,
-- "Making Other Kinds Of Table Schema Changes"): the migration runner turns
-- foreign keys off around the transaction and runs foreign_key_check before
-- it commits. It copies both tables once, so on a large database it takes time
-- in proportion to their size.

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
    source            TEXT    NOT NULL CHECK (source = 'webhook' OR source = 'reconcile' OR source = 'replay'),
    received_at       INTEGER NOT NULL,
    processed_at      INTEGER NOT NULL,
    UNIQUE (provider, event_id)
);
INSERT INTO receipts_new (id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
                          handler_version, source, received_at, processed_at)
    SELECT id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
           handler_version, source, received_at, processed_at
    FROM receipts;
DROP TABLE receipts;
ALTER TABLE receipts_new RENAME TO receipts;
CREATE INDEX receipts_status ON receipts (status, received_at);

CREATE TABLE delivery_attempts_new (
    id                INTEGER PRIMARY KEY,
    provider          TEXT    NOT NULL,
    event_id          TEXT    NOT NULL,
    received_at       INTEGER NOT NULL,
    remote_addr       TEXT    NOT NULL DEFAULT '',
    user_agent        TEXT    NOT NULL DEFAULT '',
    request_id        TEXT    NOT NULL DEFAULT '',
    body_sha256       BLOB    NOT NULL,
    signature_headers TEXT    NOT NULL DEFAULT '',
    signature_age_ms  INTEGER,          -- NULL when the scheme signs no timestamp
    outcome           TEXT    NOT NULL CHECK (outcome = 'inserted' OR outcome = 'duplicate' OR outcome = 'payload_mismatch'),
    status_code       INTEGER NOT NULL,
    FOREIGN KEY (provider, event_id) REFERENCES receipts (provider, event_id) ON DELETE CASCADE
);
INSERT INTO delivery_attempts_new (id, provider, event_id, received_at, remote_addr, user_agent, request_id,
                                   body_sha256, signature_headers, signature_age_ms, outcome, status_code)
    SELECT id, provider, event_id, received_at, remote_addr, user_agent, request_id,
           body_sha256, signature_headers, signature_age_ms, outcome, status_code
    FROM delivery_attempts;
DROP TABLE delivery_attempts;
ALTER TABLE delivery_attempts_new RENAME TO delivery_attempts;
CREATE INDEX delivery_attempts_event ON delivery_attempts (provider, event_id);
CREATE INDEX delivery_attempts_mismatch ON delivery_attempts (received_at) WHERE outcome = 'payload_mismatch';
