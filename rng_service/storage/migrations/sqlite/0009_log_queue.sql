-- Fairshoe schema v9 (SQLite): leaves committed but not yet sequenced; the same table as
-- ../postgresql/0009_log_queue.sql. SQLite's single writer sequences each leaf in the
-- transaction that logs it, so here the table stays empty; it exists so that both databases
-- keep one table history.
CREATE TABLE log_queue (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    operator      TEXT NOT NULL REFERENCES operators (operator),
    kind          TEXT NOT NULL CHECK (kind IN ('key', 'shoe_commitment', 'round', 'shoe_reveal',
                                                'rng', 'rng_reveal')),
    ident         TEXT NOT NULL,
    leaf_hash     BLOB NOT NULL CHECK (length(leaf_hash) = 32),
    entry         BLOB,
    prerequisite  INTEGER NOT NULL CHECK (prerequisite IN (0, 1)),
    created_at    TEXT NOT NULL
);
CREATE INDEX log_queue_by_operator ON log_queue (operator, seq);
