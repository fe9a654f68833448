-- A close for all customers that cannot invoice one customer (its plan is no
-- longer declared, its credits do not add up, …) invoices every other one
-- and records the customer here, with the reason, instead of failing whole
-- (issue 41). The period stays open for that customer: a later close of the
-- customer alone (invoice close --customer, or serve's scheduled close,
-- which tries again at every check) makes its invoice, and until then
-- neither late usage nor verify counts the period closed for it.
CREATE TABLE close_exclusions (
    close_id    INTEGER NOT NULL REFERENCES period_closes (id),
    customer_id TEXT    NOT NULL,
    error       TEXT    NOT NULL,
    PRIMARY KEY (close_id, customer_id)
);

CREATE TRIGGER close_exclusions_no_update BEFORE UPDATE ON close_exclusions
BEGIN
    SELECT RAISE(ABORT, 'a close''s exclusions never change');
END;
CREATE TRIGGER close_exclusions_no_delete BEFORE DELETE ON close_exclusions
BEGIN
    SELECT RAISE(ABORT, 'a close''s exclusions never change');
END;
