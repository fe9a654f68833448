-- The console's event list filtered by customer (issue 24) walks that
-- customer's usage rows newest first, a bounded window at a time
-- (schema.ConsoleReceipts). metered_usage_customer orders a customer's rows
-- by meter and event time, not by id, so without this index a customer's
-- page would read and sort every row the customer has. Building it reads
-- metered_usage once (SQLite: about a second per million rows); it changes
-- no row and no hash.
CREATE INDEX metered_usage_customer_rows ON metered_usage (customer_id, id);
