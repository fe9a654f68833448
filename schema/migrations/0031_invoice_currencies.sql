-- One invoice per customer, period and currency (issue 41). Late usage of a
-- closed period is priced by the version that priced that period; when the
-- customer has moved to a plan in another currency since, that late usage
-- goes on an invoice of its own in its currency, beside the period's
-- invoice in the customer's currency now, instead of stopping the close
-- (one invoice has one currency). So invoices are unique per customer,
-- period and currency rather than per customer and period.
--
-- SQLite cannot change a table's UNIQUE constraint: invoices is rebuilt
-- (the migration runs with foreign keys off and checks them before it
-- commits, schema.migrate), keeping every row, its id and its columns as
-- they are; its index and triggers are made again. Nothing else changes:
-- an invoice's digest and its close's seal cover the same fields.

CREATE TABLE invoices_by_currency (
    id             INTEGER PRIMARY KEY,
    close_id       INTEGER NOT NULL REFERENCES period_closes (id),
    customer_id    TEXT    NOT NULL,
    period         TEXT    NOT NULL,
    tz             TEXT    NOT NULL,
    period_start   INTEGER NOT NULL,
    period_end     INTEGER NOT NULL,
    cutoff         INTEGER NOT NULL,
    ledger_head    INTEGER NOT NULL,
    closed_at      INTEGER NOT NULL,
    digest         BLOB    NOT NULL,          -- SHA-256 over the invoice's fields and lines
    plan           TEXT    NOT NULL DEFAULT '',
    currency       TEXT    NOT NULL DEFAULT '',
    price_snapshot TEXT    NOT NULL DEFAULT '',
    price_digest   BLOB    NOT NULL DEFAULT x'',
    fee            TEXT    NOT NULL DEFAULT '',
    true_up        TEXT    NOT NULL DEFAULT '',
    total          TEXT    NOT NULL DEFAULT '',
    UNIQUE (customer_id, period_start, period_end, currency)
);
INSERT INTO invoices_by_currency (id, close_id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head, closed_at,
    digest, plan, currency, price_snapshot, price_digest, fee, true_up, total)
SELECT id, close_id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head, closed_at,
    digest, plan, currency, price_snapshot, price_digest, fee, true_up, total FROM invoices;
DROP TABLE invoices;
ALTER TABLE invoices_by_currency RENAME TO invoices;
CREATE INDEX invoices_close ON invoices (close_id);

CREATE TRIGGER invoices_no_update BEFORE UPDATE ON invoices
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;

CREATE TRIGGER invoices_no_delete BEFORE DELETE ON invoices
BEGIN
    SELECT RAISE(ABORT, 'a closed invoice never changes: add an adjustment instead');
END;
