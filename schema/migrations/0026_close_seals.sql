-- Every close is sealed: how many invoices it wrote and a digest of them,
-- chained close after close like the ledger's rows.
--
-- A close's invoices were only as safe as the triggers that refuse their
-- delete: with the triggers dropped, deleting a whole invoice (or the one
-- carrying a late line) left nothing to compare against, and verify passed.
-- The seal is written in the close's transaction, after its invoices:
-- invoices is their count, invoices_digest SHA-256 over their ids and stored
-- digests in id order (chainhash.InvoicesDigest), row_hash SHA-256 over
-- prev_hash, the close's own fields and those two (chainhash.CloseSeal). A
-- deleted, added or edited invoice no longer matches its close's seal; a
-- deleted or edited seal or close breaks the link to the next; a truncated
-- tail of closes is caught by the anchor `ledger head` prints for this chain
-- (closes:<close id>:<row hash>).
--
-- Closes made before this migration are sealed by a Go step (schema/seals.go)
-- after this file runs, in the same transaction, from the invoices they hold
-- now.

CREATE TABLE close_seals (
    close_id        INTEGER PRIMARY KEY REFERENCES period_closes (id),
    invoices        INTEGER NOT NULL,   -- invoices the close wrote
    invoices_digest BLOB    NOT NULL,   -- SHA-256 over their ids and digests, in id order
    prev_hash       BLOB    NOT NULL,   -- the previous seal's row_hash (32 zero bytes: none)
    row_hash        BLOB    NOT NULL
);

CREATE TRIGGER close_seals_no_update BEFORE UPDATE ON close_seals
BEGIN
    SELECT RAISE(ABORT, 'a close''s seal never changes');
END;
CREATE TRIGGER close_seals_no_delete BEFORE DELETE ON close_seals
BEGIN
    SELECT RAISE(ABORT, 'a close''s seal never changes');
END;
