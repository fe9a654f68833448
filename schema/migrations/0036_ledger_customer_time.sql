-- Nothing on SQLite: its (customer_id, meter, occurred_at) index already
-- finds a customer's rows of a month. PostgreSQL's 0036 adds the same for
-- its hookledger_key'd customers, and keeps the versions aligned.
SELECT 1;
