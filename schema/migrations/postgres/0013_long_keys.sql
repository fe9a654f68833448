-- Keys of any length. A btree index entry holds at most about 2.7 KB (a
-- third of a page, after compression), so a unique constraint on the raw
-- (provider, event_id), (provider, event_id, meter) or (customer_id, …)
-- refused a longer identifier on every retry, and made a SQLite ledger that
-- held one impossible to copy. hookledger now refuses identifiers over 1,024
-- bytes before they reach storage (ledger.MaxIdentifierBytes); this
-- migration makes PostgreSQL keep the longer ones older ledgers hold:
--
--   - Uniqueness is decided on a digest of each identifier
--     (hookledger_key: SHA-256 of its UTF-8 bytes, 32 bytes whatever its
--     length), so every unique index holds fixed-size entries. ON CONFLICT
--     names that expression (schema: pgKeyConflict).
--   - Lookups by identifier use hash indexes on the raw column, which store
--     a 4-byte hash per row and serve "event_id = ?" and "IN (…)" as the
--     btrees did; the hash chains' inputs (the raw text) are unchanged.
--   - delivery_attempts' and replays' foreign keys to receipts (provider,
--     event_id) need a unique constraint on those raw columns, so triggers
--     keep their two rules instead: a row must name a receipt (checked after
--     the statement, as the foreign key was, and locking that receipt
--     against deletion likewise), and deleting a receipt deletes its rows.
--
-- Cost: every index below is built once, in the migration's transaction
-- (the tables are locked meanwhile); SQLite's 0013 changes nothing, since
-- its btrees keep long keys on overflow pages.

CREATE FUNCTION hookledger_key(t text) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT sha256(convert_to(t, 'UTF8')) $$;

ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_provider_event_id_fkey;
ALTER TABLE replays DROP CONSTRAINT replays_provider_event_id_fkey;

ALTER TABLE receipts DROP CONSTRAINT receipts_provider_event_id_key;
CREATE UNIQUE INDEX receipts_key ON receipts (provider, hookledger_key(event_id));
CREATE INDEX receipts_event ON receipts USING hash (event_id);

DROP INDEX delivery_attempts_event;
CREATE INDEX delivery_attempts_event ON delivery_attempts USING hash (event_id);
DROP INDEX replays_event;
CREATE INDEX replays_event ON replays USING hash (event_id);

ALTER TABLE metered_usage DROP CONSTRAINT metered_usage_provider_event_id_meter_key;
CREATE UNIQUE INDEX metered_usage_key ON metered_usage (provider, hookledger_key(event_id), hookledger_key(meter));
CREATE INDEX metered_usage_event ON metered_usage USING hash (event_id);
DROP INDEX metered_usage_customer;
CREATE INDEX metered_usage_customer ON metered_usage USING hash (customer_id);

ALTER TABLE period_closes DROP CONSTRAINT period_closes_customer_id_period_start_period_end_key;
CREATE UNIQUE INDEX period_closes_key ON period_closes (hookledger_key(customer_id), period_start, period_end);
ALTER TABLE invoices DROP CONSTRAINT invoices_customer_id_period_start_period_end_key;
CREATE UNIQUE INDEX invoices_key ON invoices (hookledger_key(customer_id), period_start, period_end);
CREATE INDEX invoices_customer ON invoices USING hash (customer_id);
DROP INDEX invoice_lines_late;
CREATE INDEX invoice_lines_late ON invoice_lines USING hash (customer_id);

ALTER TABLE redelivery_requests DROP CONSTRAINT redelivery_requests_pkey;
CREATE UNIQUE INDEX redelivery_requests_key ON redelivery_requests (provider, hookledger_key(event_id));
CREATE INDEX redelivery_requests_event ON redelivery_requests USING hash (event_id);

CREATE FUNCTION hookledger_receipt_exists() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM receipts WHERE provider = NEW.provider AND event_id = NEW.event_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '% row names no receipt: provider %, event id %', TG_TABLE_NAME, NEW.provider, left(NEW.event_id, 100)
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER delivery_attempts_receipt AFTER INSERT OR UPDATE OF provider, event_id ON delivery_attempts
    FOR EACH ROW EXECUTE FUNCTION hookledger_receipt_exists();
CREATE TRIGGER replays_receipt AFTER INSERT OR UPDATE OF provider, event_id ON replays
    FOR EACH ROW EXECUTE FUNCTION hookledger_receipt_exists();

CREATE FUNCTION hookledger_receipt_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM delivery_attempts WHERE provider = OLD.provider AND event_id = OLD.event_id;
    DELETE FROM replays WHERE provider = OLD.provider AND event_id = OLD.event_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER receipts_delete_rows AFTER DELETE ON receipts
    FOR EACH ROW EXECUTE FUNCTION hookledger_receipt_deleted();
