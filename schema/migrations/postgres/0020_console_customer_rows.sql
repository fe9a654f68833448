-- The console's event list filtered by customer (issue 24) walks that
-- customer's usage rows newest first, a bounded window at a time
-- (schema.ConsoleReceipts). The hash index on customer_id finds the rows but
-- not in id order, so without this index a customer's page would read and
-- sort every row the customer has. Keyed on the customer id's digest, as
-- every btree on an identifier is since migration 0013 (fixed-size entries
-- whatever the identifier's length). It changes no row and no hash.
CREATE INDEX metered_usage_customer_rows ON metered_usage (hookledger_key(customer_id), id);
