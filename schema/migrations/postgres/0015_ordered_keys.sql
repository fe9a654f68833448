-- Keys that grow in order, as SQLite's 0015 (its comments are there): a
-- usage row is keyed by the receipt that applied it, receipt_id, which grows
-- with the chain, instead of its random event id. The unique btree on
-- (provider, hookledger_key(event_id), hookledger_key(meter)) and the hash
-- index on event_id each took every new event on a page of its own; both
-- now cover only the rows no receipt applied (adjustments, and usage rows
-- whose receipt retention.keys deleted before this migration).
--
-- receipt_id is filled in from the receipt of the same (provider, event_id)
-- with the append-only trigger off for that one statement, inside the
-- migration's transaction; no hash or other column changes. Cost: PostgreSQL
-- writes a new version of every ledger row (the table doubles on disk until
-- VACUUM), then builds the new indexes; the tables are locked meanwhile.

ALTER TABLE metered_usage ADD COLUMN receipt_id BIGINT;

ALTER TABLE metered_usage DISABLE TRIGGER metered_usage_no_update;
UPDATE metered_usage u SET receipt_id = r.id FROM receipts r
    WHERE u.kind = 'usage' AND r.provider = u.provider
      AND hookledger_key(r.event_id) = hookledger_key(u.event_id) AND r.event_id = u.event_id;
ALTER TABLE metered_usage ENABLE TRIGGER metered_usage_no_update;

DROP INDEX metered_usage_key;
DROP INDEX metered_usage_event;
CREATE UNIQUE INDEX metered_usage_receipt ON metered_usage (receipt_id, hookledger_key(meter)) WHERE receipt_id IS NOT NULL;
CREATE UNIQUE INDEX metered_usage_unreceipted ON metered_usage (provider, hookledger_key(event_id), hookledger_key(meter))
    WHERE receipt_id IS NULL;
CREATE INDEX metered_usage_event ON metered_usage USING hash (event_id) WHERE receipt_id IS NULL;
