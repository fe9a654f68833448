-- A close's customers it could not invoice, as SQLite's 0033 (its comments are there).
CREATE TABLE close_exclusions (
    close_id    BIGINT NOT NULL REFERENCES period_closes (id),
    customer_id TEXT   COLLATE "C" NOT NULL,
    error       TEXT   NOT NULL,
    PRIMARY KEY (close_id, customer_id)
);
CREATE TRIGGER close_exclusions_no_change BEFORE UPDATE OR DELETE ON close_exclusions
    FOR EACH ROW EXECUTE FUNCTION hookledger_refuse('a close''s exclusions never change');
CREATE TRIGGER close_exclusions_no_truncate BEFORE TRUNCATE ON close_exclusions
    FOR EACH STATEMENT EXECUTE FUNCTION hookledger_refuse('a close''s exclusions never change');
