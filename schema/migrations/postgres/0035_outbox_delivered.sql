-- Nothing on PostgreSQL: SQLite's 0035 keeps each destination's count of
-- delivered messages in a row the relay's updates add to. Here several
-- receivers' relays record deliveries at once, and transactions that each
-- updated two destinations' rows in the other's order would deadlock;
-- forward status counts through the outbox's index instead.
SELECT 1;
