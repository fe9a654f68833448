-- Quantities that do not run out, as SQLite's 0014 (its comments are there).
-- Adding a column with a constant default rewrites no row.

ALTER TABLE metered_usage ADD COLUMN decimals SMALLINT NOT NULL DEFAULT 6 CHECK (decimals BETWEEN 0 AND 6);

ALTER TABLE invoice_lines ADD COLUMN quantity_wide TEXT NOT NULL DEFAULT '';
