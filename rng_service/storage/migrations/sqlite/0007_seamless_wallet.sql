-- Fairshoe schema v7: the seamless wallet. An operator's real money may be kept in its own wallet
-- (the operator's OperatorWalletService) instead of this ledger; every money movement sent to it
-- is first written to the outbox (wallet_movements) in the transaction of the round state that
-- needs it, under the transaction id it is sent with, and its answer is recorded there.

-- How each operator's real money is kept; no row: Fairshoe's own ledger ('internal').
-- credentials and ca are file paths (never the secrets themselves).
CREATE TABLE operator_wallets (
    operator     TEXT PRIMARY KEY REFERENCES operators (operator),
    kind         TEXT NOT NULL CHECK (kind IN ('internal', 'grpc')),
    endpoint     TEXT NOT NULL,
    timeout_ms   INTEGER NOT NULL CHECK (timeout_ms > 0),
    credentials  TEXT NOT NULL,
    ca           TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);

-- Which ledger a round's money is on: fixed when it starts, whatever the operator's later setting.
ALTER TABLE rounds ADD COLUMN wallet TEXT NOT NULL DEFAULT 'internal'
    CHECK (wallet IN ('internal', 'seamless'));

CREATE TABLE wallet_movements (
    operator         TEXT NOT NULL REFERENCES operators (operator),
    transaction_id   TEXT NOT NULL,          -- sent to the wallet: its idempotency key
    round_id         TEXT NOT NULL,
    player           TEXT NOT NULL,
    currency         TEXT NOT NULL,
    game             TEXT NOT NULL,
    kind             TEXT NOT NULL CHECK (kind IN ('debit', 'credit', 'rollback')),
    purpose          TEXT NOT NULL,          -- a debit's ('bet', 'double', ...); '' otherwise
    amount           INTEGER NOT NULL CHECK (amount >= 0),
    reference        TEXT NOT NULL,          -- a credit's settled debits (comma separated), a
                                             -- rollback's debit
    request_id       TEXT,                   -- the request whose stake it is (debits)
    request_hash     TEXT,
    state            TEXT NOT NULL
        CHECK (state IN ('pending', 'acked', 'rejected', 'uncertain', 'rolled_back')),
    reason           TEXT NOT NULL,          -- a reject's reason, or the last attempt's cause
    balance_after    INTEGER,                -- the wallet's, once acknowledged
    attempts         INTEGER NOT NULL CHECK (attempts >= 0),
    next_attempt_at  TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    PRIMARY KEY (operator, transaction_id)
);
CREATE INDEX wallet_movements_by_round ON wallet_movements (operator, round_id);
CREATE UNIQUE INDEX wallet_movements_by_request ON wallet_movements (operator, request_id)
    WHERE request_id IS NOT NULL;
CREATE INDEX wallet_movements_due ON wallet_movements (next_attempt_at)
    WHERE state = 'pending';
CREATE INDEX wallet_movements_unsettled ON wallet_movements (operator, created_at)
    WHERE state IN ('pending', 'uncertain');
