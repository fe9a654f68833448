-- The forwarding outbox (docs/forwarding.md). A new receipt gets one outbox
-- row per matching destination in its custody transaction, so an event that
-- was acknowledged is an event that will be forwarded: the relay delivers each
-- row at least once under its message_id (the webhook-id the application
-- dedupes on), or leaves it dead, visible until an operator retries it.
-- Nothing here is deleted except delivered rows (retention.delivered) and,
-- with their receipt, rows retention.keys may remove (delivered ones only:
-- prune keeps every receipt that still has a pending or dead row).

CREATE TABLE outbox (
    id              INTEGER PRIMARY KEY,
    receipt_id      INTEGER NOT NULL REFERENCES receipts (id) ON DELETE CASCADE,
    destination     TEXT    NOT NULL,  -- destinations[].name; kept when the destination is removed from the config
    message_id      TEXT    NOT NULL,  -- stable: the same on every attempt
    status          TEXT    NOT NULL CHECK (status = 'pending' OR status = 'delivered' OR status = 'dead'),
    attempts        INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    pending_since   INTEGER NOT NULL,  -- created_at, or the last `forward retry`: max_age counts from here
    next_attempt_at INTEGER NOT NULL,  -- pending: due when <= now (a claim moves it past the attempt: a lease);
                                       -- delivered or dead: when that happened
    last_attempt_at INTEGER,
    delivered_at    INTEGER,
    last_status     INTEGER NOT NULL DEFAULT 0,  -- the last attempt's HTTP status (0: none)
    last_error      TEXT    NOT NULL DEFAULT '',
    UNIQUE (message_id),
    UNIQUE (receipt_id, destination)
);
-- The one index beside the keys, kept small because every message changes
-- it three times (insert, claim, outcome): a destination's due messages in
-- due order (the claim), its counts by status, its oldest pending message
-- (covered: pending_since), and its delivered messages in delivery order
-- (retention.delivered).
CREATE INDEX outbox_due ON outbox (destination, status, next_attempt_at, pending_since);

-- Every attempt, as the relay saw it.
CREATE TABLE outbox_attempts (
    id           INTEGER PRIMARY KEY,
    outbox_id    INTEGER NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
    attempted_at INTEGER NOT NULL,
    status_code  INTEGER NOT NULL DEFAULT 0,  -- 0: no response (connection error, timeout)
    latency_ms   INTEGER NOT NULL,
    response     BLOB    NOT NULL DEFAULT x'', -- the first KiB of the response body
    error        TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX outbox_attempts_message ON outbox_attempts (outbox_id);

-- Per destination: paused by an operator, and backed off as a whole while it
-- fails (failures in a row; no attempt before backoff_until).
CREATE TABLE forward_destinations (
    name          TEXT    PRIMARY KEY,
    paused        INTEGER NOT NULL DEFAULT 0 CHECK (paused = 0 OR paused = 1),
    paused_at     INTEGER,
    failures      INTEGER NOT NULL DEFAULT 0,
    backoff_until INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT    NOT NULL DEFAULT '',
    updated_at    INTEGER NOT NULL
);
