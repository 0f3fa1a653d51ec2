-- Fairshoe schema v1: operators, accounts and the double-entry ledger, idempotent responses,
-- shoes, rounds, signed round records and shoe reveals. Every key includes the operator.
-- Money is INTEGER minor units. Timestamps are RFC 3339 UTC text with microseconds, which sort.

CREATE TABLE operators (
    operator    TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL
);

INSERT INTO operators (operator, created_at) VALUES ('default', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

CREATE TABLE accounts (
    operator    TEXT NOT NULL REFERENCES operators (operator),
    holder      TEXT NOT NULL,            -- a player id, or '@house' / '@cash' / '@demo'
    currency    TEXT NOT NULL,
    mode        TEXT NOT NULL CHECK (mode IN ('DEMO', 'REAL')),
    kind        TEXT NOT NULL CHECK (kind IN ('player', 'system')),
    balance     INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (operator, holder, currency, mode),
    CHECK (kind = 'system' OR balance >= 0)
);

-- One row per posting: amount leaves source for target (same operator, currency, mode).
CREATE TABLE ledger_entries (
    entry_id              INTEGER PRIMARY KEY AUTOINCREMENT,
    operator              TEXT NOT NULL,
    currency              TEXT NOT NULL,
    mode                  TEXT NOT NULL,
    source                TEXT NOT NULL,
    target                TEXT NOT NULL,
    amount                INTEGER NOT NULL CHECK (amount > 0),
    kind                  TEXT NOT NULL
        CHECK (kind IN ('stake', 'return', 'deposit', 'withdrawal', 'demo_credit')),
    round_id              TEXT,
    wager_id              INTEGER,
    request_id            TEXT,
    source_balance_after  INTEGER NOT NULL,
    target_balance_after  INTEGER NOT NULL,
    created_at            TEXT NOT NULL,
    FOREIGN KEY (operator, source, currency, mode) REFERENCES accounts (operator, holder, currency, mode),
    FOREIGN KEY (operator, target, currency, mode) REFERENCES accounts (operator, holder, currency, mode),
    CHECK (source <> target),
    CHECK ((kind IN ('stake', 'return')) = (round_id IS NOT NULL AND wager_id IS NOT NULL))
);
CREATE INDEX ledger_by_source ON ledger_entries (operator, source, currency, mode, entry_id);
CREATE INDEX ledger_by_target ON ledger_entries (operator, target, currency, mode, entry_id);
CREATE INDEX ledger_by_round ON ledger_entries (operator, round_id) WHERE round_id IS NOT NULL;

CREATE TABLE idempotency (
    operator      TEXT NOT NULL REFERENCES operators (operator),
    request_id    TEXT NOT NULL,
    operation     TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    response      BLOB NOT NULL,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (operator, request_id)
);

CREATE TABLE shoes (
    operator        TEXT NOT NULL REFERENCES operators (operator),
    shoe_id         TEXT NOT NULL,
    player          TEXT NOT NULL,
    game            TEXT NOT NULL,
    rules_digest    TEXT NOT NULL,
    decks           INTEGER NOT NULL CHECK (decks > 0),
    cut             TEXT,                  -- cut-card fraction, e.g. '1/2'; NULL: one round
    commitment      TEXT NOT NULL,
    sealed_seed     BLOB NOT NULL,         -- AES-256-GCM under the seed-vault key, bound to shoe_id
    client_seed     BLOB NOT NULL,
    position        INTEGER NOT NULL CHECK (position >= 0),   -- cards dealt so far
    rounds_started  INTEGER NOT NULL CHECK (rounds_started >= 0),
    status          TEXT NOT NULL CHECK (status IN ('committed', 'in_play', 'finished', 'revealed')),
    version         INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    PRIMARY KEY (operator, shoe_id)
);
-- A player deals from one shoe per game at a time.
CREATE UNIQUE INDEX shoes_one_current ON shoes (operator, player, game)
    WHERE status IN ('committed', 'in_play');
CREATE INDEX shoes_finished ON shoes (status) WHERE status = 'finished';

CREATE TABLE rounds (
    operator      TEXT NOT NULL REFERENCES operators (operator),
    round_id      TEXT NOT NULL,
    player        TEXT NOT NULL,
    game          TEXT NOT NULL,
    rules_digest  TEXT NOT NULL,
    level         TEXT NOT NULL,
    mode          TEXT NOT NULL CHECK (mode IN ('DEMO', 'REAL')),
    currency      TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('open', 'finished', 'void')),
    version       INTEGER NOT NULL CHECK (version > 0),
    state         BLOB NOT NULL,          -- Round.to_bytes(): inputs, dealt cards, actions
    shoe_id       TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    PRIMARY KEY (operator, round_id),
    FOREIGN KEY (operator, shoe_id) REFERENCES shoes (operator, shoe_id)
);
-- One open round per player and game: it also keeps a cut-card shoe to one round at a time.
CREATE UNIQUE INDEX rounds_one_open ON rounds (operator, player, game) WHERE status = 'open';
CREATE INDEX rounds_by_player ON rounds
    (operator, player, (status = 'open'), created_at, round_id);

CREATE TABLE records (
    operator    TEXT NOT NULL,
    round_id    TEXT NOT NULL,
    envelope    BLOB NOT NULL,             -- signed fairshoe.round/v1, canonical JSON bytes
    created_at  TEXT NOT NULL,
    PRIMARY KEY (operator, round_id),
    FOREIGN KEY (operator, round_id) REFERENCES rounds (operator, round_id)
);

CREATE TABLE reveals (
    operator    TEXT NOT NULL,
    shoe_id     TEXT NOT NULL,
    envelope    BLOB NOT NULL,             -- signed fairshoe.shoe-reveal/v1
    created_at  TEXT NOT NULL,
    PRIMARY KEY (operator, shoe_id),
    FOREIGN KEY (operator, shoe_id) REFERENCES shoes (operator, shoe_id)
);
