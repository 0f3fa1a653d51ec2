-- Fairshoe schema v10 (PostgreSQL): nothing to change. ../sqlite/0010_checks_without_lists.sql
-- rewrites SQLite's CHECK constraints of IN lists as comparisons joined by OR (SQLite builds a
-- temporary B-tree of such a list at every row written); PostgreSQL evaluates an IN list of
-- constants as it is. The version exists so that both databases keep one migration history.
SELECT 1;
