-- A stream push takes rows until the relay claims it (issue 42). Written
-- one per ledger row, the pushes were two rows and nine index entries per
-- webhook on the writer, and the relay's claims, sends and results as many
-- again: with Stripe stream sync on, serve answered half the requests of
-- the mapping alone. Now the custody transaction that appends a row of a
-- stream meter adds it to the latest push of its customer, meter and period
-- while that push's message is open (never claimed), and writes a new push
-- and message otherwise. The relay's claim closes the message (open = 0)
-- in the transaction that claims it, so what it sends is what the push
-- carries from then on; a claimed push is never edited again. Each push
-- still commits in the transaction that writes the rows it covers
-- (invariant 7), under an identifier derived from its first row.
ALTER TABLE outbox ADD COLUMN open INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stripe_pushes ADD COLUMN row_count INTEGER NOT NULL DEFAULT 1;  -- the ledger rows it covers
ALTER TABLE stripe_pushes ADD COLUMN last_ledger_id INTEGER;                -- the last of them (stream); NULL: ledger_id, its only one

DROP TRIGGER stripe_pushes_no_update;
CREATE TRIGGER stripe_pushes_no_update BEFORE UPDATE OF id, identifier, source, ledger_id, invoice_id, line_no,
    customer_id, meter, event_name, stripe_customer, period_start, created_at, cancels ON stripe_pushes
BEGIN
    SELECT RAISE(ABORT, 'a push is appended, never edited');
END;
CREATE TRIGGER stripe_pushes_closed BEFORE UPDATE ON stripe_pushes
    WHEN NOT EXISTS (SELECT 1 FROM outbox WHERE push_id = OLD.id AND open = 1)
BEGIN
    SELECT RAISE(ABORT, 'a push is appended, never edited once the relay has claimed it');
END;
