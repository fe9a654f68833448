-- Custody of authenticated webhook deliveries and the append-only usage ledger.
-- Times are INTEGER unix milliseconds (UTC); quantities are INTEGER micro-units (1e-6).

CREATE TABLE receipts (
    id                INTEGER PRIMARY KEY,
    provider          TEXT    NOT NULL,
    event_id          TEXT    NOT NULL,
    event_type        TEXT    NOT NULL DEFAULT '',
    body              BLOB,             -- NULL once pruned by retention; body_sha256 stays
    body_sha256       BLOB    NOT NULL,
    signature_headers TEXT    NOT NULL DEFAULT '',
    status            TEXT    NOT NULL CHECK (status IN ('applied', 'ignored', 'failed')),
    error             TEXT    NOT NULL DEFAULT '',
    handler_version   TEXT    NOT NULL,
    source            TEXT    NOT NULL CHECK (source IN ('webhook', 'reconcile', 'replay')),
    received_at       INTEGER NOT NULL,
    processed_at      INTEGER NOT NULL,
    UNIQUE (provider, event_id)
);
CREATE INDEX receipts_status ON receipts (status, received_at);

CREATE TABLE delivery_attempts (
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
    outcome           TEXT    NOT NULL CHECK (outcome IN ('inserted', 'duplicate', 'payload_mismatch')),
    status_code       INTEGER NOT NULL,
    FOREIGN KEY (provider, event_id) REFERENCES receipts (provider, event_id) ON DELETE CASCADE
);
CREATE INDEX delivery_attempts_event ON delivery_attempts (provider, event_id);

CREATE TABLE metered_usage (
    id          INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('usage', 'adjustment')),
    provider    TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    customer_id TEXT    NOT NULL,
    meter       TEXT    NOT NULL,
    quantity    INTEGER NOT NULL,
    properties  TEXT    NOT NULL DEFAULT '{}',
    reason      TEXT    NOT NULL DEFAULT '',
    ref         TEXT    NOT NULL DEFAULT '',
    occurred_at INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    prev_hash   BLOB    NOT NULL,
    row_hash    BLOB    NOT NULL,
    -- A second line of defence behind receipts: even an event whose receipt was
    -- pruned can never charge the same meter twice.
    UNIQUE (provider, event_id, meter)
);
CREATE INDEX metered_usage_customer ON metered_usage (customer_id, meter, occurred_at);

CREATE TRIGGER metered_usage_no_update BEFORE UPDATE ON metered_usage
BEGIN
    SELECT RAISE(ABORT, 'metered_usage is append-only: add an adjustment instead');
END;

CREATE TRIGGER metered_usage_no_delete BEFORE DELETE ON metered_usage
BEGIN
    SELECT RAISE(ABORT, 'metered_usage is append-only: add an adjustment instead');
END;
