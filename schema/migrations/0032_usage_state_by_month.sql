-- A month's usage state of every customer, without a scan (issue 42,
-- status at scale): stripe status reads a month's totals from usage_state,
-- and the table holds a row per customer, meter and month (360,000 for
-- 10,000 customers, three meters, a year); this index finds the month's.
-- It gains an entry only when a customer's meter gets its first row of a
-- month: the writer's updates of used leave it alone.
CREATE INDEX usage_state_month ON usage_state (period_start);
