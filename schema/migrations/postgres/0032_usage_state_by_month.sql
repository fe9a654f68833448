-- A month's usage state of every customer, as SQLite's 0032 (its comments are there).
CREATE INDEX usage_state_month ON usage_state (period_start);
