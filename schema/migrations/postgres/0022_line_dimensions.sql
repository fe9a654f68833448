-- Invoice lines by dimension value, as SQLite's 0022 (its comments are there).

ALTER TABLE invoice_lines ADD COLUMN dimensions TEXT NOT NULL DEFAULT '';
