-- How far retention.payload has pruned bodies, as SQLite's 0010 (its
-- comments are there). ADD COLUMN with a constant default is a catalog
-- change, no table rewrite.

ALTER TABLE chain_head ADD COLUMN payload_pruned_before BIGINT NOT NULL DEFAULT 0;
UPDATE chain_head SET payload_pruned_before = COALESCE((SELECT MAX(payload_before) FROM prune_runs), 0);

DROP TRIGGER chain_head_forward_only ON chain_head;
CREATE TRIGGER chain_head_forward_only BEFORE UPDATE ON chain_head
    FOR EACH ROW WHEN (NEW.id <> OLD.id OR NEW.ledger_id < OLD.ledger_id OR NEW.receipt_id < OLD.receipt_id
                       OR NEW.receipts_pruned_through < OLD.receipts_pruned_through
                       OR NEW.payload_pruned_before < OLD.payload_pruned_before)
    EXECUTE FUNCTION hookledger_refuse('the chain head only moves forward');
