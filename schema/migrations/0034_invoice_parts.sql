-- Plan changes inside a period (issue 37): a customer assigned another plan
-- from a day inside a period gets one invoice whose period is split at the
-- change. Each part is priced by the plan version in force on its first
-- day: usage by event time, tiers counting within the part, each version's
-- fee and minimum prorated by the part's share of the period's time.
--
-- invoices.parts is the split: a JSON array of the parts, each with its
-- bounds (unix ms), the version that priced it and its prorated fee and
-- true-up; '' for an invoice of one part, as every invoice before this. An
-- invoice line of a split period bills one part: part_start and part_end
-- are its bounds (0 and 0: the whole period, as every line before this).
-- The invoice's digest covers both (ledger: digest v6).
ALTER TABLE invoices ADD COLUMN parts TEXT NOT NULL DEFAULT '';
ALTER TABLE invoice_lines ADD COLUMN part_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE invoice_lines ADD COLUMN part_end INTEGER NOT NULL DEFAULT 0;
