-- A receipt keeps the delivery attempt that inserted it: delivery_attempts
-- holds only the redeliveries (outcome duplicate or payload_mismatch). A new
-- event then writes one row in one table (and its two indexes) fewer: no
-- attempt row, no entry in delivery_attempts_event, no foreign-key probe,
-- about 4 fewer WAL frames per commit.
--
-- The first attempt's time, body digest, signature headers and outcome
-- (inserted) are the receipt's received_at, body_sha256, signature_headers;
-- its own fields are the columns below. status_code is also the marker:
-- NULL on a receipt stored before this migration, whose first attempt stays
-- where it is, a delivery_attempts row with outcome 'inserted' (existing
-- rows are not rewritten); never NULL on a receipt stored after it (a
-- reconciled event's attempt has status code 0). Readers (EventAttempts,
-- AttemptOutcomesInRange, CountAttempts in schema/attempts.go) read the
-- inline attempt where status_code IS NOT NULL and every delivery_attempts
-- row, so every attempt is shown once, wherever it is stored.
--
-- Retention: retention.payload clears the receipt's signature_headers with
-- its body, so the first attempt's go with them (a redelivery's row keeps
-- its own, as before); retention.keys deletes the receipt, and its first
-- attempt with it.
--
-- Cost on a large database: ALTER TABLE ... ADD COLUMN with a constant
-- default changes only the table's definition in sqlite_schema; no row is
-- read or written (SQLite reads the default for a row stored before the
-- column existed). The trigger is dropped and created again, also a
-- schema-only change. What does scan is the migration runner's PRAGMA
-- foreign_key_check after any migration (one index probe per row of
-- delivery_attempts, replays and the outbox tables). On a database of
-- 1,000,000 receipts and as many attempt rows (1.05 GB, made by `bench
-- prefill` of the previous release) `hookledger migrate` took 2.2 s, about
-- half of it that check, on a shared 2-core machine; the file did not grow
-- and no page was freed. The check grows with the attempt rows (about 10x
-- at 10,000,000); the ALTERs do not.

ALTER TABLE receipts ADD COLUMN remote_addr      TEXT    NOT NULL DEFAULT '';
ALTER TABLE receipts ADD COLUMN user_agent       TEXT    NOT NULL DEFAULT '';
ALTER TABLE receipts ADD COLUMN request_id       TEXT    NOT NULL DEFAULT '';
ALTER TABLE receipts ADD COLUMN signature_age_ms INTEGER;  -- NULL when the scheme signs no timestamp (or before 0009)
ALTER TABLE receipts ADD COLUMN status_code      INTEGER;  -- NULL: stored before 0009, the first attempt is a delivery_attempts row

-- The first attempt is a custody fact too: once stored it never changes.
DROP TRIGGER receipts_custody_facts_no_update;
CREATE TRIGGER receipts_custody_facts_no_update
BEFORE UPDATE OF id, provider, event_id, event_type, body_sha256, source, received_at, prev_hash, row_hash,
                 remote_addr, user_agent, request_id, signature_age_ms, status_code ON receipts
BEGIN
    SELECT RAISE(ABORT, 'a receipt''s custody facts never change');
END;
