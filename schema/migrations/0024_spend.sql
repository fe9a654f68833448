-- Spend limits and spend threshold alerts (issue 28, docs/entitlements.md).
--
-- A customer's spend in a month is computed from usage_state (0019) with the
-- plan version that prices the month; nothing here stores it. These tables
-- hold what is decided about it, like limit_overrides and
-- threshold_crossings do for a meter's usage.

-- Per-customer spend limit overrides, with history: the latest row in force
-- (the greatest effective_from not after the day, then the greatest id)
-- replaces the limit of the plan version's spend section. Append-only.
CREATE TABLE spend_overrides (
    id             INTEGER PRIMARY KEY,
    customer_id    TEXT    NOT NULL,
    limit_value    TEXT    NOT NULL,             -- an amount in the plan's currency
    kind           TEXT    NOT NULL DEFAULT '',  -- hard, soft, or '' for the plan's (hard without one)
    effective_from TEXT    NOT NULL,             -- YYYY-MM-DD in the months' zone
    recorded_at    INTEGER NOT NULL,
    note           TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX spend_overrides_history ON spend_overrides (customer_id, effective_from, id);
CREATE TRIGGER spend_overrides_no_update BEFORE UPDATE ON spend_overrides
BEGIN
    SELECT RAISE(ABORT, 'a spend override is appended, never edited');
END;
CREATE TRIGGER spend_overrides_no_delete BEFORE DELETE ON spend_overrides
BEGIN
    SELECT RAISE(ABORT, 'a spend override is appended, never edited');
END;

-- One row per spend threshold that fired in a period, written in the
-- transaction of the ledger row that took spend to it; the unique key makes
-- it fire once per threshold and period. plan_snapshot is the plan version
-- that priced the spend (its canonical JSON, as invoices store it), so that
-- verify recomputes the spend at row_id from the ledger alone. The alert is
-- a receipt of provider hookledger (receipt_id), forwarded through the outbox.
CREATE TABLE spend_crossings (
    id              INTEGER PRIMARY KEY,
    customer_id     TEXT    NOT NULL,
    period_start    INTEGER NOT NULL,
    period_end      INTEGER NOT NULL,
    threshold       TEXT    NOT NULL, -- as configured: "80%" or an amount
    threshold_value TEXT    NOT NULL, -- the amount it stood for
    limit_value     TEXT    NOT NULL, -- the limit in force ('' for none)
    spent           TEXT    NOT NULL, -- the period's spend after the crossing row
    currency        TEXT    NOT NULL,
    plan            TEXT    NOT NULL, -- name@effective_from
    plan_snapshot   TEXT    NOT NULL,
    row_id          INTEGER NOT NULL, -- the ledger row that crossed it
    receipt_id      INTEGER NOT NULL, -- the alert's receipt (provider hookledger)
    crossed_at      INTEGER NOT NULL,
    UNIQUE (customer_id, period_start, threshold)
);
CREATE TRIGGER spend_crossings_no_update BEFORE UPDATE ON spend_crossings
BEGIN
    SELECT RAISE(ABORT, 'a spend crossing is never edited');
END;
CREATE TRIGGER spend_crossings_no_delete BEFORE DELETE ON spend_crossings
BEGIN
    SELECT RAISE(ABORT, 'a spend crossing is never deleted');
END;
