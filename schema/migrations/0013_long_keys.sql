-- Nothing changes on SQLite: its btrees keep keys of any length (a long one
-- spills to overflow pages). PostgreSQL's 0013 makes its indexes hold keys
-- longer than a btree entry takes (its comments are there); the migration
-- shares its number so both backends stay at one schema version, which
-- copy requires.
SELECT 1;
