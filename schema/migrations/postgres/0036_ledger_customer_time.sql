-- A customer's ledger rows by event time (issue 42, status at scale): the
-- console's usage page reads each listed customer's rows of a month, and
-- PostgreSQL's only index by customer (metered_usage_customer_rows, by
-- hookledger_key and id, for a customer's rows newest first) made it read
-- all of a customer's rows and drop the other months' (26 ms a customer, a
-- second a page of 25, at 10,000,000 rows). SQLite's
-- (customer_id, meter, occurred_at) index serves it already (its 0036 does
-- nothing). One more index entry per ledger row written.
CREATE INDEX metered_usage_customer_time ON metered_usage (hookledger_key(customer_id), occurred_at);
