-- Fairshoe schema v8 (PostgreSQL): as ../sqlite/0008_wallet_http.sql, the seamless wallet over
-- HTTPS JSON ('http') and the path of the file holding its HMAC secret (never the secret itself).
ALTER TABLE operator_wallets DROP CONSTRAINT operator_wallets_kind_check;
ALTER TABLE operator_wallets ADD CONSTRAINT operator_wallets_kind_check
    CHECK (kind IN ('internal', 'grpc', 'http'));
ALTER TABLE operator_wallets ADD COLUMN hmac_secret TEXT NOT NULL DEFAULT '';
