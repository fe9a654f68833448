-- Prices by dimension (issue 26). A plan can price a meter by one of its
-- dimensions (by: model), one rate card per value; such a meter's usage is
-- then billed on one invoice line per value, and the line says which value
-- it bills: canonical JSON, {"model":"gpt-4o"}. Every line closed before
-- (and every line of a meter priced as a whole) holds '', so every row is
-- kept as it is and its digests still verify; an invoice with a dimensional
-- line has its own digest version (ledger/digest.go), which covers the
-- value.

ALTER TABLE invoice_lines ADD COLUMN dimensions TEXT NOT NULL DEFAULT '';
