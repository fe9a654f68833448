-- A stream push takes rows until the relay claims it, as SQLite's 0037 (its
-- comments are there). Claims are writer batches, and every receiver's
-- batch first locks the chain head: a claim never reads a push a receiver
-- is still adding to, and a receiver never adds to a push claimed since it
-- read it.
ALTER TABLE outbox ADD COLUMN open SMALLINT NOT NULL DEFAULT 0;
ALTER TABLE stripe_pushes ADD COLUMN row_count BIGINT NOT NULL DEFAULT 1;
ALTER TABLE stripe_pushes ADD COLUMN last_ledger_id BIGINT;

DROP TRIGGER stripe_pushes_no_update ON stripe_pushes;
CREATE TRIGGER stripe_pushes_no_update BEFORE UPDATE OF id, identifier, source, ledger_id, invoice_id, line_no,
    customer_id, meter, event_name, stripe_customer, period_start, created_at, cancels ON stripe_pushes
    FOR EACH ROW EXECUTE FUNCTION hookledger_refuse('a push is appended, never edited');

CREATE FUNCTION stripe_pushes_closed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM outbox WHERE push_id = OLD.id AND open = 1) THEN
        RAISE EXCEPTION 'a push is appended, never edited once the relay has claimed it';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER stripe_pushes_closed BEFORE UPDATE ON stripe_pushes
    FOR EACH ROW EXECUTE FUNCTION stripe_pushes_closed();
