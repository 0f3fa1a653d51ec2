-- Fairshoe schema v8 (PostgreSQL): as ../sqlite/0008_wallet_http.sql, the seamless wallet over
-- HTTPS JSON ('http') and the path of the file holding its HMAC secret (never the secret itself).
-- Rebuilt the same way as on SQLite (which cannot change a CHECK in place), so both dialects keep
-- one table history; the constraint and key keep their usual names.
CREATE TABLE operator_wallets_v8 (
    operator     TEXT COLLATE "C" PRIMARY KEY REFERENCES operators (operator),
    kind         TEXT NOT NULL,
    endpoint     TEXT NOT NULL,
    timeout_ms   INTEGER NOT NULL CHECK (timeout_ms > 0),
    credentials  TEXT NOT NULL,
    ca           TEXT NOT NULL,
    hmac_secret  TEXT NOT NULL DEFAULT '',
    updated_at   TEXT COLLATE "C" NOT NULL
);
INSERT INTO operator_wallets_v8 (operator, kind, endpoint, timeout_ms, credentials, ca, updated_at)
    SELECT operator, kind, endpoint, timeout_ms, credentials, ca, updated_at FROM operator_wallets;
DROP TABLE operator_wallets;
ALTER TABLE operator_wallets_v8 RENAME TO operator_wallets;
ALTER TABLE operator_wallets RENAME CONSTRAINT operator_wallets_v8_pkey TO operator_wallets_pkey;
ALTER TABLE operator_wallets RENAME CONSTRAINT operator_wallets_v8_operator_fkey
    TO operator_wallets_operator_fkey;
ALTER TABLE operator_wallets RENAME CONSTRAINT operator_wallets_v8_timeout_ms_check
    TO operator_wallets_timeout_ms_check;
ALTER TABLE operator_wallets ADD CONSTRAINT operator_wallets_kind_check
    CHECK (kind IN ('internal', 'grpc', 'http'));
