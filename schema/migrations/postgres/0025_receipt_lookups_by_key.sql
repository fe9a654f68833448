-- One index over receipts holds the event id: the unique btree on (provider,
-- hookledger_key(event_id)), which decides a duplicate. The hash index on
-- the raw event_id (migration 0013) served the lookups by event id; with
-- random ids (Stripe's evt_…) it took every new receipt on a bucket page of
-- its own among all stored ones, as the btree does, so each new event
-- dirtied one more page once the index outgrew the cache. Every lookup of a
-- receipt by event id now tests the digest as well (schema.byEventKey, the
-- batch's pgLookupSQL, keyJoins for joins onto receipts), and the btree
-- serves it; the raw comparison stays in each, so a lookup means what it
-- did.
--
-- The trigger that checks a delivery attempt or replay names a receipt
-- probed the hash index: it now tests the digest too. Attempts, replays and
-- redelivery requests keep their hash indexes on event_id (rows written for
-- a duplicate, a replay or a redelivery, never for a new event).
--
-- The hash index on metered_usage's customer_id (0013) goes too. A hash
-- index keeps all of one key's entries in one bucket, and an insert walks
-- the bucket's chain of overflow pages from its first page to the one with
-- room: every new ledger row visited about one page per ~400 rows its
-- customer already had (249 buffer visits per insert at 100,000 rows per
-- customer, against 4 for a btree; BENCHMARKS.md). Reads of a customer's
-- rows test the id's digest as well (schema.byCustomerKey) and go through
-- metered_usage_customer_rows, 0020's btree on (hookledger_key(customer_id),
-- id), whose new entries land at the right edge of the customer's range.
--
-- No row or hash changes; dropping an index and replacing a function take a
-- moment whatever the table's size.

CREATE OR REPLACE FUNCTION hookledger_receipt_exists() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM receipts WHERE provider = NEW.provider
        AND hookledger_key(event_id) = hookledger_key(NEW.event_id) AND event_id = NEW.event_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION '% row names no receipt: provider %, event id %', TG_TABLE_NAME, NEW.provider, left(NEW.event_id, 100)
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END
$$;

DROP INDEX receipts_event;
DROP INDEX metered_usage_customer;
