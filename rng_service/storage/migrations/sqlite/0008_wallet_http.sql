-- Fairshoe schema v8: the seamless wallet over HTTPS JSON ('http') beside gRPC, and the path of the
-- file holding the HMAC secret its requests are signed with (never the secret itself).
-- SQLite cannot change a CHECK constraint in place: the table is rebuilt, its rows kept.
CREATE TABLE operator_wallets_v8 (
    operator     TEXT PRIMARY KEY REFERENCES operators (operator),
    kind         TEXT NOT NULL CHECK (kind IN ('internal', 'grpc', 'http')),
    endpoint     TEXT NOT NULL,
    timeout_ms   INTEGER NOT NULL CHECK (timeout_ms > 0),
    credentials  TEXT NOT NULL,
    ca           TEXT NOT NULL,
    hmac_secret  TEXT NOT NULL DEFAULT '',
    updated_at   TEXT NOT NULL
);
INSERT INTO operator_wallets_v8 (operator, kind, endpoint, timeout_ms, credentials, ca, updated_at)
    SELECT operator, kind, endpoint, timeout_ms, credentials, ca, updated_at FROM operator_wallets;
DROP TABLE operator_wallets;
ALTER TABLE operator_wallets_v8 RENAME TO operator_wallets;
