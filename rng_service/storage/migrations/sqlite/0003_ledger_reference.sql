-- The operator's own reference for a deposit or withdrawal (wallet.proto: "stored with the
-- entry"); NULL for stakes, returns and demo credits.
ALTER TABLE ledger_entries ADD COLUMN reference TEXT;
