-- Fairshoe schema v4: each operator's transparency log (RFC 9162 hashing, C2SP checkpoints).
-- Never edit earlier migrations: changes come as new numbered files.

-- The log's one sequencer per operator: its size and compact range (CompactRange.to_bytes),
-- read and rewritten in the transaction that appends (SQLite's single writer serialises them).
CREATE TABLE log_state (
    operator    TEXT NOT NULL PRIMARY KEY REFERENCES operators (operator),
    size        INTEGER NOT NULL CHECK (size >= 0),
    state       BLOB NOT NULL,
    updated_at  TEXT NOT NULL
);

-- One leaf per logged envelope, dense indices 0..size-1. `entry` holds the envelope bytes only
-- for kinds with no table of their own (keys, shoe commitments); the others are read from
-- records, reveals and rng_draws by (kind, ident), and checked against leaf_hash when read.
CREATE TABLE log_leaves (
    operator    TEXT NOT NULL REFERENCES operators (operator),
    leaf_index  INTEGER NOT NULL CHECK (leaf_index >= 0),
    kind        TEXT NOT NULL CHECK (kind IN ('key', 'shoe_commitment', 'round', 'shoe_reveal',
                                              'rng', 'rng_reveal')),
    ident       TEXT NOT NULL,
    leaf_hash   BLOB NOT NULL CHECK (length(leaf_hash) = 32),
    entry       BLOB,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (operator, leaf_index),
    UNIQUE (operator, kind, ident)
);

-- Every perfect subtree hash (level 0: the leaf hashes), insert-only: proofs read O(log n) rows.
CREATE TABLE log_nodes (
    operator    TEXT NOT NULL REFERENCES operators (operator),
    level       INTEGER NOT NULL CHECK (level >= 0 AND level < 64),
    node_index  INTEGER NOT NULL CHECK (node_index >= 0),
    hash        BLOB NOT NULL CHECK (length(hash) = 32),
    PRIMARY KEY (operator, level, node_index)
);

-- Signed checkpoints (C2SP signed-note text), one per tree size at most.
CREATE TABLE log_checkpoints (
    operator    TEXT NOT NULL REFERENCES operators (operator),
    size        INTEGER NOT NULL CHECK (size >= 0),
    note        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (operator, size)
);
