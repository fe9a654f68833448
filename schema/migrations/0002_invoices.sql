-- Invoices frozen from the ledger. A close records, per customer and period,
-- the event-time period, the ingestion cutoff and the highest ledger id it
-- covers; usage recorded later for a closed period is late and is billed on a
-- later invoice by lines that name the period it belongs to.
-- Times are INTEGER unix milliseconds (UTC); quantities INTEGER micro-units.

-- Closing a month for every customer reads the month's rows by event time.
CREATE INDEX metered_usage_occurred ON metered_usage (occurred_at);

-- One row per close operation: customer_id is '' when it covered every
-- customer (close --all). It is what makes later usage late, even for a
-- customer that had no usage (and so no invoice) when the period closed.
CREATE TABLE period_closes (
    id           INTEGER PRIMARY KEY,
    customer_id  TEXT    NOT NULL,
    period       TEXT    NOT NULL,          -- label, e.g. 2026-11
    tz           TEXT    NOT NULL,          -- IANA zone the period was computed in
    period_start INTEGER NOT NULL,          -- event time, inclusive
    period_end   INTEGER NOT NULL,          -- event time, exclusive
    grace_ms     INTEGER NOT NULL,
    cutoff       INTEGER NOT NULL,          -- ingestion cutoff: rows with recorded_at < cutoff
    ledger_head  INTEGER NOT NULL,          -- rows with id <= ledger_head (exact)
    closed_at    INTEGER NOT NULL,
    UNIQUE (customer_id, period_start, period_end)
);

CREATE TABLE invoices (
    id           INTEGER PRIMARY KEY,
    close_id     INTEGER NOT NULL REFERENCES period_closes (id),
    customer_id  TEXT    NOT NULL,
    period       TEXT    NOT NULL,
    tz           TEXT    NOT NULL,
    period_start INTEGER NOT NULL,
    period_end   INTEGER NOT NULL,
    cutoff       INTEGER NOT NULL,
    ledger_head  INTEGER NOT NULL,
    closed_at    INTEGER NOT NULL,
    digest       BLOB    NOT NULL,          -- SHA-256 over the invoice's fields and lines
    UNIQUE (customer_id, period_start, period_end)
);
CREATE INDEX invoices_close ON invoices (close_id);

CREATE TABLE invoice_lines (
    id           INTEGER PRIMARY KEY,
    invoice_id   INTEGER NOT NULL REFERENCES invoices (id),
    line_no      INTEGER NOT NULL,
    customer_id  TEXT    NOT NULL,
    meter        TEXT    NOT NULL,
    aggregation  TEXT    NOT NULL,
    property     TEXT    NOT NULL DEFAULT '',
    unit         TEXT    NOT NULL DEFAULT '',
    late         INTEGER NOT NULL CHECK (late IN (0, 1)),
    -- The period the usage belongs to: the invoice's own, or for a late line
    -- the earlier closed period it was recorded too late for.
    period       TEXT    NOT NULL,
    tz           TEXT    NOT NULL,
    period_start INTEGER NOT NULL,
    period_end   INTEGER NOT NULL,
    -- The line covers this customer's and meter's rows in the period with
    -- after_id < id <= through_id.
    after_id     INTEGER NOT NULL,
    through_id   INTEGER NOT NULL,
    quantity     INTEGER NOT NULL,          -- for a late line: the change to the period's total
    row_count    INTEGER NOT NULL,          -- usage rows covered
    adjustments  INTEGER NOT NULL,          -- adjustment rows covered
    max_id       INTEGER NOT NULL,          -- highest ledger id covered (0: none)
    digest       BLOB    NOT NULL,          -- SHA-256 over the covered rows' (id, row_hash) in id order
    UNIQUE (invoice_id, line_no)
);
CREATE INDEX invoice_lines_late ON invoice_lines (customer_id, period_start, period_end, late);

-- A closed invoice never changes: corrections are adjustments billed later.
CREATE TRIGGER period_closes_no_update BEFORE UPDATE ON period_closes
BEGIN
    SELECT RAISE(ABORT, 'closed periods never change');
END;
CREATE TRIGGER period_closes_no_delete BEFORE DELETE ON period_closes
BEGIN
    SELECT RAISE(ABORT, 'closed periods never change');
END;
CREATE TRIGGER invoices_no_update BEFORE UPDATE ON invoices
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;
CREATE TRIGGER invoices_no_delete BEFORE DELETE ON invoices
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;
CREATE TRIGGER invoice_lines_no_update BEFORE UPDATE ON invoice_lines
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;
CREATE TRIGGER invoice_lines_no_delete BEFORE DELETE ON invoice_lines
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;
