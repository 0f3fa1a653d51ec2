-- Fairshoe schema v7 (PostgreSQL): the seamless wallet, as ../sqlite/0007_seamless_wallet.sql.
-- An operator's real money may be kept in its own wallet; every money movement sent to it is
-- first written to the outbox (wallet_movements) in the transaction of the round state that
-- needs it, under the transaction id it is sent with, and its answer is recorded there.

CREATE TABLE operator_wallets (
    operator     TEXT COLLATE "C" PRIMARY KEY REFERENCES operators (operator),
    kind         TEXT NOT NULL CHECK (kind IN ('internal', 'grpc')),
    endpoint     TEXT NOT NULL,
    timeout_ms   INTEGER NOT NULL CHECK (timeout_ms > 0),
    credentials  TEXT NOT NULL,
    ca           TEXT NOT NULL,
    updated_at   TEXT COLLATE "C" NOT NULL
);

ALTER TABLE rounds ADD COLUMN wallet TEXT NOT NULL DEFAULT 'internal'
    CHECK (wallet IN ('internal', 'seamless'));

CREATE TABLE wallet_movements (
    operator         TEXT COLLATE "C" NOT NULL REFERENCES operators (operator),
    transaction_id   TEXT COLLATE "C" NOT NULL,
    round_id         TEXT COLLATE "C" NOT NULL,
    player           TEXT COLLATE "C" NOT NULL,
    currency         TEXT COLLATE "C" NOT NULL,
    game             TEXT NOT NULL,
    kind             TEXT NOT NULL CHECK (kind IN ('debit', 'credit', 'rollback')),
    purpose          TEXT NOT NULL,
    amount           BIGINT NOT NULL CHECK (amount >= 0),
    reference        TEXT NOT NULL,
    request_id       TEXT COLLATE "C",
    request_hash     TEXT,
    state            TEXT NOT NULL
        CHECK (state IN ('pending', 'acked', 'rejected', 'uncertain', 'rolled_back')),
    reason           TEXT NOT NULL,
    balance_after    BIGINT,
    attempts         INTEGER NOT NULL CHECK (attempts >= 0),
    next_attempt_at  TEXT COLLATE "C" NOT NULL,
    created_at       TEXT COLLATE "C" NOT NULL,
    updated_at       TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (operator, transaction_id)
);
CREATE INDEX wallet_movements_by_round ON wallet_movements (operator, round_id);
CREATE UNIQUE INDEX wallet_movements_by_request ON wallet_movements (operator, request_id)
    WHERE request_id IS NOT NULL;
CREATE INDEX wallet_movements_due ON wallet_movements (next_attempt_at)
    WHERE state = 'pending';
CREATE INDEX wallet_movements_unsettled ON wallet_movements (operator, created_at)
    WHERE state IN ('pending', 'uncertain');
