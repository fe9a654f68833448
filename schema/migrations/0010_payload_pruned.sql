-- The chain head also records how far retention.payload has pruned bodies:
-- every receipt received before payload_pruned_before may have lost its body
-- on purpose. Each prune batch that clears bodies moves it forward in its own
-- transaction (Batch.MarkBodiesPruned), as retention.keys moves
-- receipts_pruned_through, so an interrupted prune leaves no body unaccounted
-- for. A receipt whose body is gone without it (received at or after the
-- mark, or with its signature headers still there: a prune clears both) lost
-- it some other way, and verify and dispute say so instead of "pruned".
--
-- Existing databases start from the prunes prune_runs recorded (a prune
-- logs its run once it has finished). Cost: one column added with a constant
-- default (a schema-only change), one read of prune_runs, one row updated,
-- the trigger dropped and created again.

ALTER TABLE chain_head ADD COLUMN payload_pruned_before INTEGER NOT NULL DEFAULT 0;
UPDATE chain_head SET payload_pruned_before = COALESCE((SELECT MAX(payload_before) FROM prune_runs), 0);

DROP TRIGGER chain_head_forward_only;
CREATE TRIGGER chain_head_forward_only BEFORE UPDATE ON chain_head
WHEN NEW.id != OLD.id OR NEW.ledger_id < OLD.ledger_id OR NEW.receipt_id < OLD.receipt_id
  OR NEW.receipts_pruned_through < OLD.receipts_pruned_through OR NEW.payload_pruned_before < OLD.payload_pruned_before
BEGIN
    SELECT RAISE(ABORT, 'the chain head only moves forward');
END;
