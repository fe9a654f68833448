-- Entitlements and threshold alerts (issue 28).
--
-- usage_state is what the writer keeps current: per customer, meter and
-- calendar month (in usage_state_zone's zone) the exact sum of the ledger's
-- quantities, updated in the transaction that appends each row, so an
-- entitlement check reads one row instead of summing the ledger. It is
-- derived data: serve builds it from the ledger when usage_state_zone has no
-- row (a database from before this migration) or names another zone, and
-- verify recomputes it. used is a decimal string (exact at any size).
CREATE TABLE usage_state (
    customer_id  TEXT    NOT NULL,
    meter        TEXT    NOT NULL,
    period_start INTEGER NOT NULL, -- unix ms, the month's first instant in the zone
    period_end   INTEGER NOT NULL,
    used         TEXT    NOT NULL,
    last_row_id  INTEGER NOT NULL, -- the last ledger row counted
    PRIMARY KEY (customer_id, meter, period_start)
);

-- One row once usage_state is built: the zone its months are computed in.
CREATE TABLE usage_state_zone (
    one      INTEGER PRIMARY KEY CHECK (one = 1),
    zone     TEXT    NOT NULL,
    built_at INTEGER NOT NULL,
    through  INTEGER NOT NULL -- the ledger head when it was built
);

-- Per-customer limit overrides, with history: the latest row in force (the
-- greatest effective_from not after the day, then the greatest id) replaces
-- the plan's limit for that meter. Append-only, like plan_assignments.
CREATE TABLE limit_overrides (
    id             INTEGER PRIMARY KEY,
    customer_id    TEXT    NOT NULL,
    meter          TEXT    NOT NULL,
    limit_value    TEXT    NOT NULL,             -- a decimal quantity
    kind           TEXT    NOT NULL DEFAULT '',  -- hard, soft, or '' for the plan's (hard without one)
    effective_from TEXT    NOT NULL,             -- YYYY-MM-DD in the months' zone
    recorded_at    INTEGER NOT NULL,
    note           TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX limit_overrides_history ON limit_overrides (customer_id, meter, effective_from, id);
CREATE TRIGGER limit_overrides_no_update BEFORE UPDATE ON limit_overrides
BEGIN
    SELECT RAISE(ABORT, 'a limit override is appended, never edited');
END;
CREATE TRIGGER limit_overrides_no_delete BEFORE DELETE ON limit_overrides
BEGIN
    SELECT RAISE(ABORT, 'a limit override is appended, never edited');
END;

-- One row per threshold that fired in a period: the unique key is what makes
-- an alert fire once per threshold and period, however many rows cross it,
-- however often usage falls back below it. The alert itself is a receipt of
-- provider hookledger (receipt_id), forwarded through the outbox.
CREATE TABLE threshold_crossings (
    id           INTEGER PRIMARY KEY,
    customer_id  TEXT    NOT NULL,
    meter        TEXT    NOT NULL,
    period_start INTEGER NOT NULL,
    period_end   INTEGER NOT NULL,
    threshold    TEXT    NOT NULL, -- as configured: "80%" or an absolute quantity
    threshold_value TEXT NOT NULL, -- the quantity it stood for
    limit_value  TEXT    NOT NULL, -- the limit in force ('' for an absolute threshold without one)
    used         TEXT    NOT NULL, -- the period's usage after the crossing row
    row_id       INTEGER NOT NULL, -- the ledger row that crossed it
    receipt_id   INTEGER NOT NULL, -- the alert's receipt (provider hookledger)
    crossed_at   INTEGER NOT NULL,
    UNIQUE (customer_id, meter, period_start, threshold)
);
CREATE TRIGGER threshold_crossings_no_update BEFORE UPDATE ON threshold_crossings
BEGIN
    SELECT RAISE(ABORT, 'a threshold crossing is never edited');
END;
CREATE TRIGGER threshold_crossings_no_delete BEFORE DELETE ON threshold_crossings
BEGIN
    SELECT RAISE(ABORT, 'a threshold crossing is never deleted');
END;

-- receipts.source admits 'alert' (the step loosenChecks in schema/corrections.go widens
-- the CHECK in place: every existing row already satisfies the wider one, so
-- no row is copied, the way SQLite documents for loosening a constraint).
