-- Keys that grow in order (the 10M-receipts issue). With random event ids
-- (Stripe's evt_…) every index keyed by the event id takes each new event on
-- a leaf of its own among all stored ones: once the index outgrows the page
-- cache, every event dirties one more page per such index, and at 10,000,000
-- receipts serve ran at 0.55 of its empty-database throughput. One such index
-- is needed, the receipts' UNIQUE (provider, event_id): it is what decides a
-- duplicate. metered_usage's UNIQUE (provider, event_id, meter) was a second
-- one; it is now keyed by the receipt's id, which the writer assigns in
-- order, so a usage row's key lands at the right edge like the row itself:
--
--   - receipt_id is the id of the receipt that applied the row (usage rows),
--     NULL for a row no receipt applied (an adjustment) and for a usage row
--     whose receipt retention.keys had already deleted when this migration
--     ran (so its id is not known). It is not part of the row's hash: the
--     chain's input is unchanged, and every row keeps its hash. verify checks
--     it against the receipt instead (schema/verify.go).
--   - UNIQUE (receipt_id, meter) for rows with a receipt: one receipt
--     charges each meter at most once, however a replay or a retry runs.
--   - UNIQUE (provider, event_id, meter) only for rows without a receipt:
--     adjustments (their own random adj_… ids, rare), and kinds added later
--     that no receipt applies are keyed there.
--
-- Lookups of an event's rows (trace, dispute, adjust --ref event:…) go through
-- its receipt: (provider, event_id) → receipts.id → metered_usage_receipt.
-- An event whose receipt is gone (retention.keys, or deleted otherwise) has
-- its rows looked for among every row that names a receipt: a scan, which
-- the lookup of a stored event never pays (schema/usage.go).
--
-- What the second line of defence guarantees now, and what it no longer
-- does: docs/architecture.md ("Keys that grow in order").
--
-- SQLite cannot drop a UNIQUE constraint, so the table is rebuilt: every
-- row with its id, columns and hashes, and receipt_id from the receipt of the
-- same (provider, event_id). Cost: one pass over the ledger and one probe of
-- the receipts' key per row, then the indexes built again. Foreign keys are
-- off while migrations run and no foreign key names metered_usage.

CREATE TABLE metered_usage_new (
    id          INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL CHECK (kind IN ('usage', 'adjustment')),
    provider    TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    customer_id TEXT    NOT NULL,
    meter       TEXT    NOT NULL,
    quantity    INTEGER NOT NULL,
    properties  TEXT    NOT NULL DEFAULT '{}',
    reason      TEXT    NOT NULL DEFAULT '',
    ref         TEXT    NOT NULL DEFAULT '',
    occurred_at INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    prev_hash   BLOB    NOT NULL,
    row_hash    BLOB    NOT NULL,
    decimals    INTEGER NOT NULL DEFAULT 6 CHECK (decimals BETWEEN 0 AND 6),
    receipt_id  INTEGER  -- receipts.id of the receipt that applied it; NULL: none (see above)
);

INSERT INTO metered_usage_new (id, kind, provider, event_id, customer_id, meter, quantity, properties, reason, ref,
        occurred_at, recorded_at, prev_hash, row_hash, decimals, receipt_id)
    SELECT u.id, u.kind, u.provider, u.event_id, u.customer_id, u.meter, u.quantity, u.properties, u.reason, u.ref,
           u.occurred_at, u.recorded_at, u.prev_hash, u.row_hash, u.decimals,
           CASE WHEN u.kind = 'usage' THEN
               (SELECT r.id FROM receipts r WHERE r.provider = u.provider AND r.event_id = u.event_id) END
    FROM metered_usage u ORDER BY u.id;

DROP TABLE metered_usage;
ALTER TABLE metered_usage_new RENAME TO metered_usage;

CREATE UNIQUE INDEX metered_usage_receipt ON metered_usage (receipt_id, meter) WHERE receipt_id IS NOT NULL;
CREATE UNIQUE INDEX metered_usage_unreceipted ON metered_usage (provider, event_id, meter) WHERE receipt_id IS NULL;
CREATE INDEX metered_usage_customer ON metered_usage (customer_id, meter, occurred_at);
CREATE INDEX metered_usage_occurred ON metered_usage (occurred_at);

CREATE TRIGGER metered_usage_no_update BEFORE UPDATE ON metered_usage
BEGIN
    SELECT RAISE(ABORT, 'metered_usage is append-only: add an adjustment instead');
END;

CREATE TRIGGER metered_usage_no_delete BEFORE DELETE ON metered_usage
BEGIN
    SELECT RAISE(ABORT, 'metered_usage is append-only: add an adjustment instead');
END;
