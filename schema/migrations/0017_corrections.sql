-- Corrections (void and amend). A void is a ledger row of kind 'void' that
-- compensates one usage row (ref row:ID); an amended event is a receipt of
-- source 'amend', stored under an id derived from the event it corrects.
--
-- Both need a CHECK constraint loosened: metered_usage.kind admits 'void',
-- receipts.source admits 'amend'. SQLite cannot alter a CHECK constraint, and
-- rebuilding metered_usage would copy the whole ledger; loosening one is the
-- case SQLite documents for editing the stored table definition in place
-- (https://sqlite.org/lang_altertable.html, "otherwise-equivalent" changes:
-- every stored row still satisfies the new constraint, the on-disk format is
-- unchanged). The migration runner's step for 0017 (schema/corrections.go)
-- does that edit, bumps schema_version and runs integrity_check.
--
-- The partial index holds only corrections (adjustments and voids), so
-- verify, the trace and the admin API find them without scanning usage rows,
-- and the hot path's usage inserts do not touch it.

CREATE INDEX metered_usage_corrections ON metered_usage (kind, ref) WHERE kind <> 'usage';
