-- A receipt keeps the delivery attempt that inserted it, as SQLite's 0009
-- (its comments are there): status_code NULL marks a receipt stored before
-- this migration, whose first attempt is a delivery_attempts row.
--
-- Cost on a large database: since PostgreSQL 11, ADD COLUMN with a constant
-- default (or none) is a catalog change, no table rewrite; it holds the
-- table's ACCESS EXCLUSIVE lock for that moment, and so does the trigger's
-- replacement. The migration's advisory lock keeps receivers from running
-- it twice.

ALTER TABLE receipts
    ADD COLUMN remote_addr      TEXT   NOT NULL DEFAULT '',
    ADD COLUMN user_agent       TEXT   NOT NULL DEFAULT '',
    ADD COLUMN request_id       TEXT   NOT NULL DEFAULT '',
    ADD COLUMN signature_age_ms BIGINT,
    ADD COLUMN status_code      BIGINT;

DROP TRIGGER receipts_custody_facts_no_update ON receipts;
CREATE TRIGGER receipts_custody_facts_no_update
    BEFORE UPDATE OF id, provider, event_id, event_type, body_sha256, source, received_at, prev_hash, row_hash,
                     remote_addr, user_agent, request_id, signature_age_ms, status_code ON receipts
    FOR EACH ROW EXECUTE FUNCTION hookledger_refuse('a receipt''s custody facts never change');
