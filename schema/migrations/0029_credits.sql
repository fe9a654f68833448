-- Prepaid credits (docs/invoicing.md, "Credits"): the credit ledger. Every
-- grant, every burn (what a grant gave a closed invoice), every void and
-- every expiry (the balance a grant lost) is one row, appended and never
-- changed, chained like the usage ledger's rows (chainhash.CreditEntry):
-- row_hash is SHA-256 over prev_hash and the row's fields.
--
-- A grant's id is its idempotency key: one grant per id (kind 'grant',
-- invoice_id 0), one burn per grant and invoice, one void or expiry per
-- grant. Burns are written in the close's transaction, with the invoice
-- they pay; grants, voids and expiries in the writer's.
--
-- The credits are a ledger of their own rather than rows of metered_usage:
-- they are money, not quantities of a meter, and every usage scan, the
-- usage state and each list of meters would otherwise have to step over
-- them. verify walks this chain and recomputes every burn and balance from
-- the grants and the closed invoices.

CREATE TABLE credit_entries (
    id           INTEGER PRIMARY KEY,
    kind         TEXT    NOT NULL CHECK (kind IN ('grant', 'burn', 'void', 'expiry')),
    grant_id     TEXT    NOT NULL,
    customer_id  TEXT    NOT NULL,
    currency     TEXT    NOT NULL,
    amount       TEXT    NOT NULL,              -- exact decimal in the currency's minor unit
    balance      TEXT    NOT NULL,              -- the grant's balance after this row
    category     TEXT    NOT NULL DEFAULT '',   -- a grant's: paid | promotional
    priority     INTEGER NOT NULL DEFAULT 0,
    effective_at INTEGER NOT NULL DEFAULT 0,
    expires_at   INTEGER NOT NULL DEFAULT 0,    -- 0: never
    invoice_id   INTEGER NOT NULL DEFAULT 0,    -- a burn's invoice
    reason       TEXT    NOT NULL DEFAULT '',
    actor        TEXT    NOT NULL DEFAULT '',
    recorded_at  INTEGER NOT NULL,
    prev_hash    BLOB    NOT NULL,
    row_hash     BLOB    NOT NULL,
    UNIQUE (grant_id, kind, invoice_id)
);
CREATE INDEX credit_entries_customer ON credit_entries (customer_id, id);
CREATE INDEX credit_entries_invoice ON credit_entries (invoice_id) WHERE invoice_id <> 0;

CREATE TRIGGER credit_entries_no_update BEFORE UPDATE ON credit_entries
BEGIN
    SELECT RAISE(ABORT, 'credit_entries is append-only: void the grant instead');
END;
CREATE TRIGGER credit_entries_no_delete BEFORE DELETE ON credit_entries
BEGIN
    SELECT RAISE(ABORT, 'credit_entries is append-only: void the grant instead');
END;
