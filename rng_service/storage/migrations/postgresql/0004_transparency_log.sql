-- Fairshoe schema v4 (PostgreSQL): each operator's transparency log; the same tables as
-- ../sqlite/0004_transparency_log.sql. Never edit earlier migrations.

-- The log's one sequencer per operator: its size and compact range (CompactRange.to_bytes),
-- locked SELECT ... FOR UPDATE by the transaction that appends, so replicas append in turn and
-- leaf indices stay dense and in commit order.
CREATE TABLE log_state (
    operator    TEXT COLLATE "C" NOT NULL PRIMARY KEY REFERENCES operators (operator),
    size        BIGINT NOT NULL CHECK (size >= 0),
    state       BYTEA NOT NULL,
    updated_at  TEXT COLLATE "C" NOT NULL
);

-- One leaf per logged envelope, dense indices 0..size-1. `entry` holds the envelope bytes only
-- for kinds with no table of their own (keys, shoe commitments); the others are read from
-- records, reveals and rng_draws by (kind, ident), and checked against leaf_hash when read.
CREATE TABLE log_leaves (
    operator    TEXT COLLATE "C" NOT NULL REFERENCES operators (operator),
    leaf_index  BIGINT NOT NULL CHECK (leaf_index >= 0),
    kind        TEXT COLLATE "C" NOT NULL CHECK (kind IN ('key', 'shoe_commitment', 'round',
                                                          'shoe_reveal', 'rng', 'rng_reveal')),
    ident       TEXT COLLATE "C" NOT NULL,
    leaf_hash   BYTEA NOT NULL CHECK (length(leaf_hash) = 32),
    entry       BYTEA,
    created_at  TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (operator, leaf_index),
    UNIQUE (operator, kind, ident)
);

-- Every perfect subtree hash (level 0: the leaf hashes), insert-only: proofs read O(log n) rows.
CREATE TABLE log_nodes (
    operator    TEXT COLLATE "C" NOT NULL REFERENCES operators (operator),
    level       SMALLINT NOT NULL CHECK (level >= 0 AND level < 64),
    node_index  BIGINT NOT NULL CHECK (node_index >= 0),
    hash        BYTEA NOT NULL CHECK (length(hash) = 32),
    PRIMARY KEY (operator, level, node_index)
);

-- Signed checkpoints (C2SP signed-note text), one per tree size at most.
CREATE TABLE log_checkpoints (
    operator    TEXT COLLATE "C" NOT NULL REFERENCES operators (operator),
    size        BIGINT NOT NULL CHECK (size >= 0),
    note        TEXT NOT NULL,
    created_at  TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (operator, size)
);
