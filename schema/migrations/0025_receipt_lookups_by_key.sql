-- Nothing changes on SQLite. PostgreSQL's 0025 drops its receipts' hash
-- index on event_id, which took every new random event id on a page of its
-- own, and looks receipts up through their unique key instead; SQLite's
-- receipts already hold the event id in one index only, the UNIQUE
-- (provider, event_id) that decides a duplicate. The migration is here so
-- both backends reach the same schema version (hookledger copy requires
-- it).
SELECT 1;
