-- Fairshoe schema v6: a ledger entry's public id, what clients see of it.
-- Before, a transaction id (and a ListTransactions page token) was entry_id, one counter that
-- every operator's postings share: a tenant could measure every other tenant's volume by the gap
-- between two of its own ids. entry_id stays the internal order; clients see a random 128-bit
-- hex id, unique per operator. (SQLite adds a NOT NULL column only with a default: it fills
-- nothing after the backfill below, because every insert names the id.)
ALTER TABLE ledger_entries ADD COLUMN public_id TEXT NOT NULL DEFAULT '';
UPDATE ledger_entries SET public_id = lower(hex(randomblob(16)));
CREATE UNIQUE INDEX ledger_by_public_id ON ledger_entries (operator, public_id);

-- A retried deposit or withdrawal answers its stored first answer: name the entry there by its
-- public id too (and drop the counter from it).
UPDATE idempotency
SET response = CAST(json_remove(json_set(CAST(response AS TEXT), '$.transaction_id',
    (SELECT e.public_id FROM ledger_entries e
     WHERE e.operator = idempotency.operator
       AND e.entry_id = json_extract(CAST(idempotency.response AS TEXT), '$.entry_id'))),
    '$.entry_id') AS BLOB)
WHERE operation IN ('deposit', 'withdrawal')
  AND json_extract(CAST(response AS TEXT), '$.entry_id') IS NOT NULL;
