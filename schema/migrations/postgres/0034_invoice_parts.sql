-- Plan changes inside a period, as SQLite's 0034 (its comments are there).
ALTER TABLE invoices ADD COLUMN parts TEXT NOT NULL DEFAULT '';
ALTER TABLE invoice_lines ADD COLUMN part_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE invoice_lines ADD COLUMN part_end BIGINT NOT NULL DEFAULT 0;
