-- Guards for what 0005 chained (after its Go step has written the hashes).
-- They refuse mistakes, not attackers: whoever can drop a trigger can edit
-- rows, and then the hash chains, the chain head and anchors show it.

-- Replay changes a receipt's status, error, handler_version and
-- processed_at; retention clears its body and signature_headers (body_sha256
-- stays) or deletes it. Nothing changes the facts the chain covers.
CREATE TRIGGER receipts_custody_facts_no_update
BEFORE UPDATE OF id, provider, event_id, event_type, body_sha256, source, received_at, prev_hash, row_hash ON receipts
BEGIN
    SELECT RAISE(ABORT, 'a receipt''s custody facts never change');
END;

CREATE TRIGGER chain_head_no_delete BEFORE DELETE ON chain_head
BEGIN
    SELECT RAISE(ABORT, 'chain_head is where the hash chains end: it is never deleted');
END;

CREATE TRIGGER chain_head_forward_only BEFORE UPDATE ON chain_head
WHEN NEW.id != OLD.id OR NEW.ledger_id < OLD.ledger_id OR NEW.receipt_id < OLD.receipt_id
  OR NEW.receipts_pruned_through < OLD.receipts_pruned_through
BEGIN
    SELECT RAISE(ABORT, 'the chain head only moves forward');
END;
