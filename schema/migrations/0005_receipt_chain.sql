-- Chain the receipts and keep the end of both hash chains in one row.
--
-- Each receipt gets prev_hash and row_hash: SHA-256 over its predecessor's
-- row_hash and its custody facts (ledger.ReceiptLink: id, provider, event id,
-- event type, body_sha256, the status it was stored with, source,
-- received_at). The receipt's id is its position in the chain; the writer
-- assigns it from the head. Deleting or editing a receipt breaks the chain
-- like it does for ledger rows.
--
-- chain_head is the one row every write batch reads once and advances once
-- inside its transaction: where the ledger and the receipts chain end. Deleting
-- the newest rows of either chain breaks no link, but leaves the head pointing
-- past them; an anchor taken from the head (serve's log, `ledger head`) proves
-- it even if the head row is rewritten too.
--
-- receipts_pruned_through is the highest receipt id retention (keys) has
-- deleted, advanced in the same transaction as the delete: below it a receipt
-- may be missing on purpose.
--
-- Existing receipts are chained in id order by a Go step (schema/chain.go)
-- after this file runs, in the same transaction. Their ids and every other
-- column are unchanged. It writes every receipt once, so on a large database
-- it takes time in proportion to the number of receipts.

ALTER TABLE receipts ADD COLUMN prev_hash BLOB NOT NULL DEFAULT x'';
ALTER TABLE receipts ADD COLUMN row_hash  BLOB NOT NULL DEFAULT x'';

CREATE TABLE chain_head (
    id                      INTEGER PRIMARY KEY CHECK (id = 1),
    ledger_id               INTEGER NOT NULL,  -- metered_usage.id of the last ledger row (0: none)
    ledger_hash             BLOB    NOT NULL,  -- its row_hash (32 zero bytes: none)
    receipt_id              INTEGER NOT NULL,  -- receipts.id of the last receipt (0: none)
    receipt_hash            BLOB    NOT NULL,  -- its row_hash
    receipts_pruned_through INTEGER NOT NULL DEFAULT 0
);
INSERT INTO chain_head (id, ledger_id, ledger_hash, receipt_id, receipt_hash)
    SELECT 1, COALESCE((SELECT MAX(id) FROM metered_usage), 0),
           COALESCE((SELECT row_hash FROM metered_usage ORDER BY id DESC LIMIT 1), zeroblob(32)),
           0, zeroblob(32);
