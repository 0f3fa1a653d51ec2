-- Fairshoe schema v10 (SQLite): the CHECK constraints a round transition meets on every row it
-- writes (a round's status, a shoe's status, a ledger entry's kind, a log leaf's kind) written
-- as comparisons joined by OR instead of an IN list of three or more constants: the same
-- constraints, accepting and refusing the same values. SQLite builds a temporary B-tree of such
-- a list each time a statement runs the check (about 32,000 instructions a row written,
-- counted; about 4 rows a transition), and compares an OR of two to six values directly.
--
-- Only the constraints' text changes, never a row or an index: the table definitions are edited
-- in sqlite_schema (SQLite's documented procedure for changing CHECK constraints in place, "ALTER
-- TABLE", section 7 of its manual), which is exact for a constraint that every stored row
-- satisfies before and after, and an index created and dropped (on the few operators' rows)
-- moves the schema cookie on, so that every connection reads the new definitions. The last
-- statement refuses the migration (an integer overflow rolls it back) if any old list is left.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''open'', ''finished'', ''void''))',
    'CHECK (status = ''open'' OR status = ''finished'' OR status = ''void'')')
WHERE type = 'table' AND name = 'rounds';
UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''committed'', ''in_play'', ''finished'', ''revealed''))',
    'CHECK (status = ''committed'' OR status = ''in_play'' OR status = ''finished'' OR status = ''revealed'')')
WHERE type = 'table' AND name = 'shoes';
UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (kind IN (''stake'', ''return'', ''deposit'', ''withdrawal'', ''demo_credit''))',
    'CHECK (kind = ''stake'' OR kind = ''return'' OR kind = ''deposit'' OR kind = ''withdrawal'' OR kind = ''demo_credit'')')
WHERE type = 'table' AND name = 'ledger_entries';
UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (kind IN (''key'', ''shoe_commitment'', ''round'', ''shoe_reveal'',
                                              ''rng'', ''rng_reveal''))',
    'CHECK (kind = ''key'' OR kind = ''shoe_commitment'' OR kind = ''round''
                                   OR kind = ''shoe_reveal'' OR kind = ''rng'' OR kind = ''rng_reveal'')')
WHERE type = 'table' AND name = 'log_leaves';
PRAGMA writable_schema = OFF;
CREATE INDEX schema_0010_cookie ON operators (created_at);
DROP INDEX schema_0010_cookie;
SELECT abs(-9223372036854775808) WHERE EXISTS (
    SELECT 1 FROM sqlite_schema WHERE type = 'table'
    AND name IN ('rounds', 'shoes', 'ledger_entries', 'log_leaves')
    AND (instr(sql, 'status IN (''open''') OR instr(sql, 'status IN (''committed''')
         OR instr(sql, 'kind IN (''stake'', ''return'', ''deposit''')
         OR instr(sql, 'kind IN (''key'''))
) OR (SELECT count(*) FROM sqlite_schema WHERE type = 'table'
      AND name IN ('rounds', 'shoes', 'ledger_entries', 'log_leaves')
      AND instr(sql, ' OR ') > 0) != 4;
