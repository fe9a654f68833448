-- Every close is sealed, as SQLite's 0026 (its comments are there). Closes
-- made before this migration are sealed by the same Go step (schema/seals.go).

CREATE TABLE close_seals (
    close_id        BIGINT PRIMARY KEY REFERENCES period_closes (id),
    invoices        BIGINT NOT NULL,
    invoices_digest BYTEA  NOT NULL,
    prev_hash       BYTEA  NOT NULL,
    row_hash        BYTEA  NOT NULL
);
CREATE TRIGGER close_seals_no_change BEFORE UPDATE OR DELETE ON close_seals
    FOR EACH ROW EXECUTE FUNCTION hookledger_refuse('a close''s seal never changes');
CREATE TRIGGER close_seals_no_truncate BEFORE TRUNCATE ON close_seals
    FOR EACH STATEMENT EXECUTE FUNCTION hookledger_refuse('a close''s seal never changes');
