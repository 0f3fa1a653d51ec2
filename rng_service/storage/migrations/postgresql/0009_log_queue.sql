-- Fairshoe schema v9 (PostgreSQL): as ../sqlite/0009_log_queue.sql, leaves committed but not yet
-- sequenced. A transaction that logs an envelope queues its leaf here instead of locking the
-- log's sequencer row (log_state) until its COMMIT, so the transactions of an operator no
-- longer take turns on one row; a sequencer integrates the queue in batches under that row's
-- lock (rng_service/storage/sql/log.py), and any read that needs the log complete integrates
-- it first. `prerequisite`: a signing key's leaf, appended only if the log lacks it then.
CREATE TABLE log_queue (
    seq           BIGSERIAL PRIMARY KEY,
    operator      TEXT COLLATE "C" NOT NULL REFERENCES operators (operator),
    kind          TEXT COLLATE "C" NOT NULL CHECK (kind IN ('key', 'shoe_commitment', 'round',
                                                            'shoe_reveal', 'rng', 'rng_reveal')),
    ident         TEXT COLLATE "C" NOT NULL,
    leaf_hash     BYTEA NOT NULL CHECK (length(leaf_hash) = 32),
    entry         BYTEA,
    prerequisite  BOOLEAN NOT NULL,
    created_at    TEXT COLLATE "C" NOT NULL
);
CREATE INDEX log_queue_by_operator ON log_queue (operator, seq);
