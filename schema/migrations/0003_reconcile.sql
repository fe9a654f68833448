-- Reconciliation with providers, replays of stored receipts, and what
-- retention needs to find its work cheaply.
-- Times are INTEGER unix milliseconds (UTC).

-- One row per provider. A run lists [window_start, window_end]; after each
-- complete page it stores the cursor to resume from. A run that finishes
-- clears the cursor and moves completed_through to its window_end, and the
-- next run starts at completed_through minus the configured overlap.
CREATE TABLE reconcile_checkpoints (
    provider          TEXT    PRIMARY KEY,
    window_start      INTEGER NOT NULL,
    window_end        INTEGER NOT NULL,
    cursor            TEXT    NOT NULL DEFAULT '',  -- '' when no run is in progress
    pages             INTEGER NOT NULL DEFAULT 0,   -- pages completed in the run in progress
    completed_through INTEGER NOT NULL DEFAULT 0,   -- window_end of the last complete run
    updated_at        INTEGER NOT NULL
);

-- Redeliveries hookledger asked a provider for (GitHub: POST .../attempts).
-- One row per missing event: a later run sees the row and does not ask again.
CREATE TABLE redelivery_requests (
    provider     TEXT    NOT NULL,
    event_id     TEXT    NOT NULL,
    delivery_id  TEXT    NOT NULL,  -- the provider's id of the delivery asked to be repeated
    requested_at INTEGER NOT NULL,
    status_code  INTEGER NOT NULL,  -- what the provider answered
    PRIMARY KEY (provider, event_id)
);

-- Every replay of a stored receipt (hookledger replay). The receipt keeps its
-- original source (webhook or reconcile); this table says when it was
-- re-applied, from which status, and under which handler version.
CREATE TABLE replays (
    id                   INTEGER PRIMARY KEY,
    provider             TEXT    NOT NULL,
    event_id             TEXT    NOT NULL,
    replayed_at          INTEGER NOT NULL,
    from_status          TEXT    NOT NULL,
    to_status            TEXT    NOT NULL,
    error                TEXT    NOT NULL DEFAULT '',
    from_handler_version TEXT    NOT NULL,
    handler_version      TEXT    NOT NULL,
    FOREIGN KEY (provider, event_id) REFERENCES receipts (provider, event_id) ON DELETE CASCADE
);
CREATE INDEX replays_event ON replays (provider, event_id);

-- Every prune that changed something: what retention deleted and up to when.
-- Ledger rows are never pruned, so after a prune that deleted keys a usage row
-- can lack its receipt on purpose: only rows with id <= ledger_head_id of such
-- a prune can (every later row was written while its receipt existed).
CREATE TABLE prune_runs (
    id             INTEGER PRIMARY KEY,
    pruned_at      INTEGER NOT NULL,
    payload_before INTEGER,          -- NULL when retention.payload is unset
    keys_before    INTEGER,          -- NULL when retention.keys is unset
    bodies_pruned  INTEGER NOT NULL,
    keys_deleted   INTEGER NOT NULL,
    ledger_head_id INTEGER NOT NULL  -- MAX(metered_usage.id) when the prune ended
);

-- audit mismatches reads only these rows; a partial index costs nothing on
-- the ordinary (inserted/duplicate) attempts.
CREATE INDEX delivery_attempts_mismatch ON delivery_attempts (received_at) WHERE outcome = 'payload_mismatch';
