-- Money on invoices (the prices issue). A priced invoice keeps the plan
-- versions that priced it (price_snapshot: canonical JSON, and its SHA-256)
-- and, per line, what the period had been billed before the line, the exact
-- and the rounded amount and how the price reached it, so `verify` can
-- recompute every amount from what the invoice itself stores. Amounts are
-- decimal strings: exact, and the same text on both backends. An invoice
-- closed without a plan (or before this migration) keeps '' in every money
-- column and is verified as before.

ALTER TABLE invoices ADD COLUMN plan           TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN currency       TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN price_snapshot TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN price_digest   BLOB NOT NULL DEFAULT x'';
ALTER TABLE invoices ADD COLUMN fee            TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN true_up        TEXT NOT NULL DEFAULT '';
ALTER TABLE invoices ADD COLUMN total          TEXT NOT NULL DEFAULT '';

ALTER TABLE invoice_lines ADD COLUMN billed_before  TEXT NOT NULL DEFAULT '0'; -- the period's billed total before this line
ALTER TABLE invoice_lines ADD COLUMN plan_version   TEXT NOT NULL DEFAULT '';  -- effective_from of the version that priced it
ALTER TABLE invoice_lines ADD COLUMN amount_precise TEXT NOT NULL DEFAULT '';
ALTER TABLE invoice_lines ADD COLUMN amount         TEXT NOT NULL DEFAULT '';
ALTER TABLE invoice_lines ADD COLUMN charge         TEXT NOT NULL DEFAULT '';  -- the price's breakdown, JSON
