-- Corrections (void and amend), as SQLite's 0017 (its comments are there):
-- metered_usage.kind admits 'void', receipts.source admits 'amend', and a
-- partial index holds the corrections.

ALTER TABLE metered_usage DROP CONSTRAINT metered_usage_kind_check;
ALTER TABLE metered_usage ADD CONSTRAINT metered_usage_kind_check CHECK (kind IN ('usage', 'adjustment', 'void'));
ALTER TABLE receipts DROP CONSTRAINT receipts_source_check;
ALTER TABLE receipts ADD CONSTRAINT receipts_source_check CHECK (source IN ('webhook', 'reconcile', 'replay', 'api', 'amend'));

CREATE INDEX metered_usage_corrections ON metered_usage (kind, ref) WHERE kind <> 'usage';
