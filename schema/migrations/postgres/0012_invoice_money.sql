-- Money on invoices, as SQLite's 0012 (its comments are there).

ALTER TABLE invoices ADD COLUMN plan           TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN currency       TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN price_snapshot TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN price_digest   BYTEA NOT NULL DEFAULT '\x';
ALTER TABLE invoices ADD COLUMN fee            TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN true_up        TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN total          TEXT NOT NULL DEFAULT '';

ALTER TABLE invoice_lines ADD COLUMN billed_before  TEXT NOT NULL DEFAULT '0'; -- the period's billed total before this line
ALTER TABLE invoice_lines ADD COLUMN plan_version   TEXT NOT NULL DEFAULT '';  -- effective_from of the version that priced it
ALTER TABLE invoice_lines ADD COLUMN amount_precise TEXT NOT NULL DEFAULT '';
ALTER TABLE invoice_lines ADD COLUMN amount         TEXT NOT NULL DEFAULT '';
ALTER TABLE invoice_lines ADD COLUMN charge         TEXT NOT NULL DEFAULT '';  -- the price's breakdown, JSON
