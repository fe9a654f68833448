-- Credit alerts (docs/entitlements.md, "Credits in checks and alerts"):
-- credits.balance_low and credits.depleted, decided in the writer's
-- transaction like the usage and spend alerts.
--
-- One row per grant and threshold that fired, written in the transaction
-- of the ledger row whose draw took the grant's available credit (its
-- balance less what the open month's spend draws from it, in the burn
-- order) to or below the threshold; the unique key makes it fire once per
-- grant and threshold, ever. threshold is as configured ("25%", "10.00")
-- or 'depleted'. The numbers are those at the crossing row; the alert is a
-- receipt of provider hookledger (receipt_id), forwarded through the outbox.
CREATE TABLE credit_crossings (
    id              INTEGER PRIMARY KEY,
    grant_id        TEXT    NOT NULL,
    customer_id     TEXT    NOT NULL,
    currency        TEXT    NOT NULL,
    threshold       TEXT    NOT NULL, -- as configured, or 'depleted'
    threshold_value TEXT    NOT NULL, -- the amount it stood for
    balance         TEXT    NOT NULL, -- the grant's balance in the credit ledger
    drawn           TEXT    NOT NULL, -- what the open month's spend draws from it
    available       TEXT    NOT NULL, -- balance - drawn
    plan            TEXT    NOT NULL, -- name@effective_from of the version that priced the spend
    period_start    INTEGER NOT NULL,
    period_end      INTEGER NOT NULL,
    row_id          INTEGER NOT NULL, -- the ledger row that crossed it
    receipt_id      INTEGER NOT NULL, -- the alert's receipt (provider hookledger)
    crossed_at      INTEGER NOT NULL,
    UNIQUE (grant_id, threshold)
);
CREATE INDEX credit_crossings_customer ON credit_crossings (customer_id, id);
CREATE TRIGGER credit_crossings_no_update BEFORE UPDATE ON credit_crossings
BEGIN
    SELECT RAISE(ABORT, 'a credit crossing is never edited');
END;
CREATE TRIGGER credit_crossings_no_delete BEFORE DELETE ON credit_crossings
BEGIN
    SELECT RAISE(ABORT, 'a credit crossing is never deleted');
END;
