-- Quantities that do not run out (the prices issue). A ledger row stores its
-- quantity as an integer with its number of decimal places: every row so
-- far, and every ordinary row from now on, has 6 (micro-units), so existing
-- rows keep their columns and their hashes. A row too large for micro-units
-- in 64 bits (a 10 TB gauge is 10^13 bytes, 10^19 micro-units) keeps the
-- fewest decimals that hold it exactly: 10^13 bytes is quantity 10000000000000
-- with 0 decimals. Such a row's hash covers its decimals too (ledger.Row.Hash).
--
-- An invoice line's quantity is an aggregate and may exceed any integer
-- column (a month of bytes, or sums to 10^24): one beyond 64-bit micro-units
-- is quantity_wide, its exact decimal in units, with quantity 0; every other
-- line keeps '' there and its micro-units in quantity, as before.

ALTER TABLE metered_usage ADD COLUMN decimals INTEGER NOT NULL DEFAULT 6 CHECK (decimals BETWEEN 0 AND 6);

ALTER TABLE invoice_lines ADD COLUMN quantity_wide TEXT NOT NULL DEFAULT '';
