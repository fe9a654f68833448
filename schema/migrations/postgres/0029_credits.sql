-- The credit ledger, as SQLite's 0029 (its comments are there).

CREATE TABLE credit_entries (
    id           BIGINT  PRIMARY KEY,
    kind         TEXT    NOT NULL CHECK (kind IN ('grant', 'burn', 'void', 'expiry')),
    grant_id     TEXT    NOT NULL,
    customer_id  TEXT    NOT NULL,
    currency     TEXT    NOT NULL,
    amount       TEXT    NOT NULL,
    balance      TEXT    NOT NULL,
    category     TEXT    NOT NULL DEFAULT '',
    priority     BIGINT  NOT NULL DEFAULT 0,
    effective_at BIGINT  NOT NULL DEFAULT 0,
    expires_at   BIGINT  NOT NULL DEFAULT 0,
    invoice_id   BIGINT  NOT NULL DEFAULT 0,
    reason       TEXT    NOT NULL DEFAULT '',
    actor        TEXT    NOT NULL DEFAULT '',
    recorded_at  BIGINT  NOT NULL,
    prev_hash    BYTEA   NOT NULL,
    row_hash     BYTEA   NOT NULL,
    UNIQUE (grant_id, kind, invoice_id)
);
CREATE INDEX credit_entries_customer ON credit_entries (customer_id, id);
CREATE INDEX credit_entries_invoice ON credit_entries (invoice_id) WHERE invoice_id <> 0;
CREATE TRIGGER credit_entries_no_change BEFORE UPDATE OR DELETE ON credit_entries
    FOR EACH ROW EXECUTE FUNCTION hookledger_refuse('credit_entries is append-only: void the grant instead');
CREATE TRIGGER credit_entries_no_truncate BEFORE TRUNCATE ON credit_entries
    FOR EACH STATEMENT EXECUTE FUNCTION hookledger_refuse('credit_entries is append-only: void the grant instead');
