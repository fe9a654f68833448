-- One invoice per customer, period and currency, as SQLite's 0031 (its
-- comments are there); the key digests the customer id as 0013 does.
DROP INDEX invoices_key;
CREATE UNIQUE INDEX invoices_key ON invoices (hookledger_key(customer_id), period_start, period_end, currency);
