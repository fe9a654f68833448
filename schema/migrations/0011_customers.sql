-- The customer registry and plan assignments (the prices issue).
--
-- Both are append-only, like the ledger: a change to a customer is a new
-- customers row (the latest row per customer_id is the customer now, the
-- earlier rows its history), and a plan change is a new plan_assignments row
-- effective from a date. Neither table is part of the custody chain; a closed
-- invoice keeps the plan version it was priced with in its own row, so
-- history here never changes a closed invoice.

CREATE TABLE customers (
    id           INTEGER PRIMARY KEY,
    customer_id  TEXT    NOT NULL,
    name         TEXT    NOT NULL DEFAULT '',
    email        TEXT    NOT NULL DEFAULT '',
    external_ids TEXT    NOT NULL DEFAULT '{}', -- a JSON object, keys sorted: {"stripe":"cus_…"}
    recorded_at  INTEGER NOT NULL,
    note         TEXT    NOT NULL DEFAULT ''    -- why the change was made
);
CREATE INDEX customers_history ON customers (customer_id, id);

CREATE TRIGGER customers_no_update BEFORE UPDATE ON customers
BEGIN
    SELECT RAISE(ABORT, 'a customer changes by a new row, never an edit');
END;
CREATE TRIGGER customers_no_delete BEFORE DELETE ON customers
BEGIN
    SELECT RAISE(ABORT, 'a customer changes by a new row, never an edit');
END;

CREATE TABLE plan_assignments (
    id             INTEGER PRIMARY KEY,
    customer_id    TEXT    NOT NULL,
    plan           TEXT    NOT NULL,
    effective_from TEXT    NOT NULL,  -- YYYY-MM-DD, compared with an invoice period's first day in the period's zone
    recorded_at    INTEGER NOT NULL,
    note           TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX plan_assignments_history ON plan_assignments (customer_id, effective_from, id);

CREATE TRIGGER plan_assignments_no_update BEFORE UPDATE ON plan_assignments
BEGIN
    SELECT RAISE(ABORT, 'a plan assignment is appended, never edited');
END;
CREATE TRIGGER plan_assignments_no_delete BEFORE DELETE ON plan_assignments
BEGIN
    SELECT RAISE(ABORT, 'a plan assignment is appended, never edited');
END;
